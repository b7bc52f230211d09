"""The team knowledge base: notes on models, files, pairs and runs; deployments; production telemetry."""
