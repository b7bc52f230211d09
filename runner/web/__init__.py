"""The runner's pages and JSON API: benchmark runs, predictions, soaks, hardware classes."""
