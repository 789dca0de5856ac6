"""Designer: writes an environment package for a task prompt (an LLM through any OpenAI-compatible endpoint,
or the offline blueprint designer), then corrects it from the validator's feedback. See issue 'Designer agent'."""
