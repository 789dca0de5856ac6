"""The LLM backends every stage that talks to a model shares: `chat` (the `ChatBackend` protocol, its typed
completions and errors), `endpoint` (any OpenAI-compatible endpoint) and `local` (the embedded llama.cpp models
and their store). The designer writes environments with them; agents play environments with them."""
