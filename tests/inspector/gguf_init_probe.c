// Gives each file to ggml's gguf_init_from_file as llama.cpp's model loader does (no_alloc, with a
// ggml context) and prints one line per file: 1 or 0 (loaded or refused), a tab, and the last error
// llama.cpp logged. Used by tests/inspector/test_gguf_agrees.py.
#include "ggml.h"
#include "gguf.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static char last[512];
static char line[512];

static void keep_errors(enum ggml_log_level level, const char * text, void * user_data) {
    (void) user_data;
    if (level != GGML_LOG_LEVEL_ERROR && level != GGML_LOG_LEVEL_CONT) {
        return;
    }
    strncat(line, text, sizeof(line) - strlen(line) - 1);
    char * nl = strchr(line, '\n');
    if (nl) {  // a whole line: keep the first error of a file (its cause), not gguf.cpp's summary lines
        *nl = '\0';
        if (!last[0]) {
            snprintf(last, sizeof(last), "%s", line);
        }
        line[0] = '\0';
    }
}

int main(int argc, char ** argv) {
    ggml_log_set(keep_errors, NULL);
    for (int i = 1; i < argc; ++i) {
        last[0] = line[0] = '\0';
        struct ggml_context * ctx = NULL;
        struct gguf_init_params params = { /*no_alloc =*/ true, /*ctx =*/ &ctx };
        struct gguf_context * g = gguf_init_from_file(argv[i], params);
        printf("%d\t%s\n", g != NULL, last);
        fflush(stdout);
        if (g) {
            gguf_free(g);
        }
        if (ctx) {
            ggml_free(ctx);
        }
    }
    return 0;
}
