"""How the embedded model names a task written in another language: its English translation of each of a fixed
set of tasks (fixed before any output was read), and the package name made from it. Read the translations as a
translator would: does each keep the task's trade and what the agent does?

    python benchmarks/naming.py [--local-model qwen2.5-coder-1.5b]
"""

from __future__ import annotations

import argparse
import time

from openadapt.designer.naming import name_package
from openadapt.llm.local import LocalLLM
from openadapt.llm.local.backend import LocalSettings

# (the task, what it says in English, by a person)
TASKS = [
    ("Trainiere einen Agenten, der ausgefallene Kühlanlagen in einer Molkerei diagnostiziert",
     "diagnose failed refrigeration plants in a dairy"),
    ("Entraîne un agent à planifier les gardes des infirmières dans un hôpital",
     "schedule nurses' shifts in a hospital"),
    ("Entrena un agente para conciliar facturas de proveedores con pedidos de compra",
     "reconcile supplier invoices with purchase orders"),
    ("Trainiere einen Agenten, der Lagerbestände in einem Ersatzteillager nachbestellt",
     "reorder stock in a spare-parts warehouse"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local-model", default=None, help="a catalogue id or a .gguf path (default: the default)")
    args = parser.parse_args()
    llm = LocalLLM(LocalSettings(model=args.local_model))
    for task, meaning in TASKS:
        started = time.monotonic()
        named = name_package(task, llm)
        print(f"{task}\n  meant:       {meaning}\n  translation: {named.english}\n  name:        {named.name} "
              f"({named.source}, {time.monotonic() - started:.1f} s)")


if __name__ == "__main__":
    main()
