// Loads GGUF files vocab-only through the real libllama and prints what llama.cpp itself
// makes of them (one JSON object per file), then llama.cpp's own compatibility verdict for
// the first file as target and each other as draft. Used by tests/inspector/test_llama_agrees.py.
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <string>

bool common_speculative_are_compatible(const llama_model * model_tgt, const llama_model * model_dft);

static void quiet(enum ggml_log_level, const char *, void *) {}

int main(int argc, char ** argv) {
    if (!getenv("PROBE_VERBOSE")) {
        llama_log_set(quiet, nullptr);
    }
    llama_backend_init();
    llama_model_params params = llama_model_default_params();
    params.vocab_only = true;
    llama_model * first = nullptr;
    for (int i = 1; i < argc; ++i) {
        llama_model * model = llama_model_load_from_file(argv[i], params);
        if (!model) {
            printf("{\"file\": %d, \"loaded\": false}\n", i);
            continue;
        }
        const llama_vocab * v = llama_model_get_vocab(model);
        printf("{\"file\": %d, \"loaded\": true, \"vocab_type\": %d, \"add_bos\": %s, \"add_eos\": %s, "
               "\"bos\": %d, \"eos\": %d, \"n_tokens\": %d",
               i, (int) llama_vocab_type(v), llama_vocab_get_add_bos(v) ? "true" : "false",
               llama_vocab_get_add_eos(v) ? "true" : "false", llama_vocab_bos(v), llama_vocab_eos(v),
               llama_vocab_n_tokens(v));
        if (first) {
            printf(", \"compatible_with_first\": %s", common_speculative_are_compatible(first, model) ? "true" : "false");
        } else {
            first = model;
        }
        printf("}\n");
        fflush(stdout);
    }
    return 0;
}
