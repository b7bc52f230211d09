"""The registry web app: GGUF files, models, compatible pairs and their results."""
