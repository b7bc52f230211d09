// specreg-replay: the target's greedy transcript, and llama.cpp's own speculative loop replayed against it.
//
//   specreg-replay transcript OUT.json [llama.cpp options: -m TARGET -p PROMPT -n N --temp 0 ...]
//       Decodes PROMPT with the target one token at a time, as llama-completion does, sampling with the
//       options' sampler (greedy at --temp 0), and writes {"prompt": [...], "tokens": [...], "margins": [...]}:
//       the prompt's tokens, the generated tokens and, per generated token, the logit of the chosen token
//       minus the best other logit (a small margin is a near-tie another batch shape may flip).
//
//   specreg-replay replay TRANSCRIPT.json [llama.cpp options: -m TARGET -md DRAFT --spec-type ... -p PROMPT ...]
//       Runs examples/speculative-simple/speculative-simple.cpp of the pinned build (llama.cpp 11434) step by
//       step with llama.cpp's own common_speculative_* calls, except that the target never decodes: its verify
//       step (common_sampler_sample_and_accept_n at temperature 0: the longest prefix of the draft that equals
//       the target's greedy tokens, then the target's next token) reads the transcript instead. At temperature
//       0 a drafted token is accepted iff it equals the target's greedy token there, so the drafted and
//       accepted counts are the ones the real run would report, at the cost of the draft alone. Writes
//       {"n_predict", "n_drafted", "n_accept", "steps": [[drafted, accepted], ...]} to stdout.
//
//   specreg-replay timing OUT.json [llama.cpp options: -m MODEL -c N -t T ...]   (env SPECREG_TIMING=DEPTH,MAXB,REPS)
//       The cost model's measurements: with DEPTH tokens already in the context, the median time to decode a
//       batch of b = 1..MAXB tokens *with logits for every token* (as a verify step needs them; llama-bench
//       computes only the last token's, which understates the output layer with a large vocabulary). Writes
//       {"depth", "batch": [...], "seconds": [...]}.
//
// The options are parsed by llama.cpp's own common_params_parse(LLAMA_EXAMPLE_SPECULATIVE), so every
// speculative option means what it means to llama-speculative-simple. Lines mirrored from
// speculative-simple.cpp are marked "[ss:LINE]" (line numbers of the pinned file).

#include "arg.h"
#include "common.h"
#include "llama.h"
#include "sampling.h"
#include "speculative.h"

#include <algorithm>
#include <clocale>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

static void json_tokens(std::ostream & os, const std::vector<llama_token> & v) {
    os << "[";
    for (size_t i = 0; i < v.size(); ++i) {
        os << (i ? "," : "") << v[i];
    }
    os << "]";
}

// The integers of the JSON array named `key` in `text` (the transcript this tool wrote: no general JSON parser needed).
static bool read_ints(const std::string & text, const std::string & key, std::vector<llama_token> & out) {
    const size_t at = text.find("\"" + key + "\"");
    if (at == std::string::npos) {
        return false;
    }
    const size_t open = text.find('[', at);
    const size_t close = text.find(']', open);
    if (open == std::string::npos || close == std::string::npos) {
        return false;
    }
    std::stringstream ss(text.substr(open + 1, close - open - 1));
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.find_first_not_of(" \n\t") != std::string::npos) {
            out.push_back((llama_token) std::stol(item));
        }
    }
    return true;
}

static int fail(const char * what) {
    fprintf(stderr, "specreg-replay: %s\n", what);
    return 2;
}

static int transcript(common_params & params, const std::string & out_path) {
    auto init = common_init_from_params(params);
    llama_model * model = init->model();
    llama_context * ctx = init->context();
    if (model == nullptr || ctx == nullptr) {
        return fail("the target model could not be loaded");
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    std::vector<llama_token> inp = common_tokenize(ctx, params.prompt, true, true);  // [ss:83]
    if (inp.empty() || (int) inp.size() >= (int) llama_n_ctx(ctx) || (int) inp.size() > (int) llama_n_batch(ctx)) {
        return fail("the prompt is empty or does not fit the context and batch sizes");
    }
    common_sampler_ptr smpl(common_sampler_init(model, params.sampling));

    common_batch batch(ctx);
    for (size_t i = 0; i < inp.size(); ++i) {
        batch.add(inp[i], (llama_pos) i, 0, i + 1 == inp.size());
    }
    if (llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, batch.get()) != 0) {
        return fail("decoding the prompt failed");
    }
    std::vector<llama_token> out;
    std::vector<float> margins;
    int n_past = (int) inp.size();
    const int n_predict = params.n_predict < 0 ? (int) llama_n_ctx(ctx) - n_past : params.n_predict;
    while ((int) out.size() < n_predict && n_past < (int) llama_n_ctx(ctx)) {
        const float * logits = llama_get_logits_ith(ctx, -1);
        const llama_token id = common_sampler_sample(smpl.get(), ctx, -1);
        common_sampler_accept(smpl.get(), id, true);
        float best_other = -INFINITY;
        for (int t = 0; t < n_vocab; ++t) {
            if (t != id && logits[t] > best_other) {
                best_other = logits[t];
            }
        }
        out.push_back(id);
        margins.push_back(logits[id] - best_other);
        if (llama_vocab_is_eog(vocab, id)) {
            break;
        }
        batch.clear();
        batch.add(id, n_past++, 0, true);
        if (llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, batch.get()) != 0) {
            return fail("decoding failed");
        }
    }
    std::ofstream os(out_path);
    os << "{\"prompt\": ";
    json_tokens(os, inp);
    os << ", \"tokens\": ";
    json_tokens(os, out);
    os << ", \"margins\": [";
    for (size_t i = 0; i < margins.size(); ++i) {
        os << (i ? "," : "") << (std::isfinite(margins[i]) ? margins[i] : 1e9f);
    }
    os << "]}\n";
    return os.good() ? 0 : fail("the transcript could not be written");
}

static int timing(common_params & params, const std::string & out_path) {
    int depth = 128, max_b = 9, reps = 5;
    if (const char * spec = getenv("SPECREG_TIMING")) {
        if (sscanf(spec, "%d,%d,%d", &depth, &max_b, &reps) != 3 || depth < 1 || max_b < 1 || reps < 1) {
            return fail("SPECREG_TIMING must be DEPTH,MAX_BATCH,REPEATS (positive integers)");
        }
    }
    params.n_outputs_max = max_b;
    params.n_outputs_max_per_seq = max_b;
    auto init = common_init_from_params(params);
    llama_model * model = init->model();
    llama_context * ctx = init->context();
    if (model == nullptr || ctx == nullptr) {
        return fail("the model could not be loaded");
    }
    if (depth + max_b >= (int) llama_n_ctx(ctx) || depth > (int) llama_n_batch(ctx)) {
        return fail("DEPTH + MAX_BATCH must fit the context (-c) and DEPTH the batch (-b)");
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    common_batch batch(ctx);
    for (int i = 0; i < depth; ++i) {  // the context's contents do not change the cost, only their number
        batch.add((llama_token) ((i * 7919) % n_vocab), i, 0, false);
    }
    if (llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, batch.get()) != 0) {
        return fail("decoding the context failed");
    }
    std::vector<double> seconds;
    for (int b = 1; b <= max_b; ++b) {
        std::vector<double> t;
        for (int r = 0; r <= reps; ++r) {  // the first repeat warms up and is not counted
            batch.clear();
            for (int i = 0; i < b; ++i) {
                batch.add((llama_token) (((depth + i) * 104729) % n_vocab), depth + i, 0, true);
            }
            const int64_t t0 = ggml_time_us();
            if (llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, batch.get()) != 0) {
                return fail("decoding a batch failed");
            }
            llama_get_logits_ith(ctx, -1);  // the logits are ready: the decode is complete
            const int64_t t1 = ggml_time_us();
            llama_memory_seq_rm(llama_get_memory(ctx), 0, depth, -1);
            if (r > 0) {
                t.push_back((t1 - t0) / 1e6);
            }
        }
        std::sort(t.begin(), t.end());
        seconds.push_back(t[t.size() / 2]);
    }
    std::ofstream os(out_path);
    os << "{\"depth\": " << depth << ", \"batch\": [";
    for (int b = 1; b <= max_b; ++b) {
        os << (b > 1 ? "," : "") << b;
    }
    os << "], \"seconds\": [";
    for (size_t i = 0; i < seconds.size(); ++i) {
        os << (i ? "," : "") << seconds[i];
    }
    os << "]}\n";
    return os.good() ? 0 : fail("the timings could not be written");
}

static int replay(common_params & params, const std::string & transcript_path) {
    std::ifstream is(transcript_path);
    std::stringstream text;
    text << is.rdbuf();
    std::vector<llama_token> inp, truth;
    if (!is.good() && !is.eof()) {
        return fail("the transcript could not be read");
    }
    if (!read_ints(text.str(), "prompt", inp) || !read_ints(text.str(), "tokens", truth) || inp.empty()) {
        return fail("the transcript has no prompt or tokens");
    }

    // [ss:33-36] output limits for the verify batches
    const auto output_limits = common_speculative_get_output_limits(params.n_batch, params.n_parallel,
                                                                    common_speculative_n_max(&params.speculative));
    params.n_outputs_max = output_limits.total;
    params.n_outputs_max_per_seq = output_limits.per_seq;

    // [ss:46-62] the target is loaded (memory-mapped: its context and vocabulary drive the draft's setup and
    // the compatibility check), never decoded
    auto llama_init_tgt = common_init_from_params(params);
    llama_model * model_tgt = llama_init_tgt->model();
    llama_context * ctx_tgt = llama_init_tgt->context();
    if (model_tgt == nullptr || ctx_tgt == nullptr) {
        return fail("the target model could not be loaded");
    }
    const llama_vocab * vocab = llama_model_get_vocab(model_tgt);

    common_speculative_init_result_ptr spec_init;
    {
        common_params params_dft = common_base_params_to_speculative(params);
        spec_init = common_speculative_init_from_params(params_dft, model_tgt, ctx_tgt);
        params.speculative.draft.ctx_tgt = ctx_tgt;
        params.speculative.draft.ctx_dft = spec_init->context();
    }
    llama_context * ctx_dft = params.speculative.draft.ctx_dft;

    const llama_seq_id seq_id = 0;
    struct common_speculative * spec = common_speculative_init(params.speculative, 1);  // [ss:122]
    if (spec == nullptr) {
        return fail("failed to initialize speculative decoding");
    }

    {  // [ss:130-141] the prompt but its last token goes to the speculative implementation(s)
        common_batch batch_prompt(ctx_tgt);
        for (size_t i = 0; i + 1 < inp.size(); ++i) {
            batch_prompt.add(inp[i], (llama_pos) i, seq_id, false);
        }
        if (!common_speculative_process(spec, batch_prompt)) {
            return fail("failed to process the speculative prompt");
        }
    }
    llama_token id_last = inp.back();                              // [ss:145]
    llama_tokens prompt_tgt(inp.begin(), inp.end() - 1);           // [ss:148]
    int n_past = (int) inp.size() - 1;                             // [ss:151]
    common_speculative_begin(spec, seq_id, prompt_tgt);            // [ss:153]

    common_batch batch_tgt(ctx_tgt);
    llama_tokens draft;
    int n_predict = 0, n_drafted = 0, n_accept = 0;
    size_t at = 0;  // the next transcript token: what the target emits after id_last
    std::vector<std::pair<int, int>> steps;

    while (true) {
        // [ss:186-202] the largest draft the context and the generation budget allow, then the draft
        int n_draft_max = (int) llama_n_ctx(ctx_tgt) - n_past - 2;
        if (params.n_predict >= 0) {
            n_draft_max = std::min(n_draft_max, params.n_predict - n_predict - 1);
        }
        n_draft_max = std::max(n_draft_max, 0);
        common_speculative_get_draft_params(spec, seq_id) = {
            /* .drafting   = */ true,
            /* .n_max      = */ n_draft_max,
            /* .pos0       = */ n_past,
            /* .id_last    = */ id_last,
            /* .prompt     = */ &prompt_tgt,
            /* .result     = */ &draft,
        };
        common_speculative_draft(spec);

        // [ss:212-219] the draft context goes back to the target's last position before verification. The
        // real run reads that position from the target's memory, which stays empty here: it is n_past - 1.
        if (ctx_dft) {
            llama_memory_seq_rm(llama_get_memory(ctx_dft), seq_id, n_past, -1);
        }

        // [ss:227-238] the verify batch [id_last, draft...], fed to the speculative implementation(s) only
        batch_tgt.clear();
        batch_tgt.add(id_last, n_past++, seq_id, true);
        for (size_t i = 0; i < draft.size(); ++i) {
            batch_tgt.add(draft[i], n_past + (llama_pos) i, seq_id, true);
        }
        if (!common_speculative_process(spec, batch_tgt)) {
            return fail("failed to process the speculative batch");
        }

        // [ss:258] the verify step at temperature 0: the draft's longest prefix equal to the transcript,
        // then the transcript's next token. A transcript ends at the target's end of generation: an accepted
        // end-of-generation token ends the run (the real run stops there too [ss:308]; what it would still
        // count of a draft past that token, the transcript cannot know).
        std::vector<llama_token> ids;
        for (size_t i = 0; i < draft.size() && at + i < truth.size() && draft[i] == truth[at + i]; ++i) {
            ids.push_back(draft[i]);
            if (llama_vocab_is_eog(vocab, draft[i])) {
                break;
            }
        }
        const size_t n_acc = ids.size();
        if (ids.empty() || !llama_vocab_is_eog(vocab, ids.back())) {
            if (at + ids.size() >= truth.size()) {
                fprintf(stderr, "specreg-replay: the transcript (%zu tokens) ends before the run does; make it "
                                "longer than -n by the largest draft\n", truth.size());
                return 3;
            }
            ids.push_back(truth[at + ids.size()]);
        }
        at += ids.size();

        const size_t n_draft = draft.size();
        common_speculative_accept(spec, seq_id, (uint16_t) n_acc);  // [ss:292]
        n_past += (int) n_acc;                                        // [ss:295-298]
        n_drafted += (int) n_draft;
        n_accept += (int) n_acc;
        n_predict += (int) ids.size();
        steps.emplace_back((int) n_draft, (int) n_acc);

        bool has_eos = false;
        for (size_t i = 0; i < ids.size(); ++i) {  // [ss:305-312]
            prompt_tgt.push_back(id_last);
            id_last = ids[i];
            if (llama_vocab_is_eog(vocab, id_last)) {
                has_eos = true;
                break;
            }
        }
        draft.clear();
        if (ctx_dft) {  // [ss:329-337]
            llama_memory_seq_rm(llama_get_memory(ctx_dft), seq_id, n_past, -1);
        }
        if ((params.n_predict >= 0 && n_predict > params.n_predict) || has_eos) {  // [ss:339]
            break;
        }
    }
    common_speculative_free(spec);

    printf("{\"n_predict\": %d, \"n_drafted\": %d, \"n_accept\": %d, \"steps\": [", n_predict, n_drafted, n_accept);
    for (size_t i = 0; i < steps.size(); ++i) {
        printf("%s[%d,%d]", i ? "," : "", steps[i].first, steps[i].second);
    }
    printf("]}\n");
    return 0;
}

int main(int argc, char ** argv) {
    std::setlocale(LC_NUMERIC, "C");
    if (argc < 3 || (strcmp(argv[1], "transcript") != 0 && strcmp(argv[1], "replay") != 0 &&
                     strcmp(argv[1], "timing") != 0)) {
        fprintf(stderr, "usage: specreg-replay transcript OUT.json|replay TRANSCRIPT.json|timing OUT.json "
                        "[llama.cpp options]\n");
        return 2;
    }
    const std::string mode = argv[1], path = argv[2];
    // llama.cpp's parser sees argv[0] and the options after our two words
    std::vector<char *> rest = {argv[0]};
    for (int i = 3; i < argc; ++i) {
        rest.push_back(argv[i]);
    }
    common_params params;
    common_init();
    if (!common_params_parse((int) rest.size(), rest.data(), params, LLAMA_EXAMPLE_SPECULATIVE)) {
        return 2;
    }
    llama_backend_init();
    llama_numa_init(params.numa);
    int rc = 2;
    try {
        rc = mode == "transcript" ? transcript(params, path)
           : mode == "timing"     ? timing(params, path)
                                  : replay(params, path);
    } catch (const std::exception & e) {  // llama.cpp's own refusals (an incompatible draft) are exceptions
        rc = fail(e.what());
    }
    llama_backend_free();
    return rc;
}
