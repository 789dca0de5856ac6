"""FastAPI app for the hospital_admissions_workflow environment (`uvicorn server.app:app`, or `openadapt serve`)."""

from pathlib import Path

from openadapt.envpkg.serving import create_package_app

app = create_package_app(Path(__file__).resolve().parents[1])


def main() -> None:
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
