"""FastAPI app of diagnose_failing_irrigation: `uvicorn server.app:app`, `python -m server.app`, or `openadapt serve`."""

from pathlib import Path

from openadapt.envpkg.serving import create_package_app, serve_main

app = create_package_app(Path(__file__).resolve().parents[1])


def main() -> None:
    serve_main(app)


if __name__ == "__main__":
    main()
