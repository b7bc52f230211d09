"""GGUF inspection: a streaming header reader, llama.cpp's effective tokenizer values, pair checks."""
