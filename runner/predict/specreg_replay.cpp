// specreg-replay: the target's greedy transcript, and llama.cpp's own speculative loop replayed against it.
//
//   specreg-replay transcript OUT.json [llama.cpp options: -m TARGET -p PROMPT -n N --temp 0 ...]
//       Decodes PROMPT with the target one token at a time, as llama-completion does, sampling with the
//       options' sampler (greedy at --temp 0), and writes {"prompt": [...], "tokens": [...], "margins": [...]}:
//       the prompt's tokens, the generated tokens and, per generated token, the logit of the chosen token
//       minus the best other logit (a small margin is a near-tie another batch shape may flip). Above
//       temperature 0 the tokens are sampled and "cands" holds, per position, the sampling distribution after
//       the options' whole chain: [id, p, id, p, ...] for up to 32 tokens with p > 0 (what verification samples).
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
//   specreg-replay timing OUT.json [llama.cpp options: -m MODEL -c N -t T ...]   (env SPECREG_TIMING=DEPTH,MAXB,REPS;
//                                                                                 SPECREG_TIMING_SIZES=1,2,..: the
//                                                                                 batch sizes to time, 1 to MAXB)
//       The cost model's measurements: with DEPTH tokens already in the context, the median time to decode a
//       batch of b = 1..MAXB tokens *with logits for every token* (as a verify step needs them; llama-bench
//       computes only the last token's, which understates the output layer with a large vocabulary), and with
//       only the last token's logits (what a draft model pays to take in the target's batch). Writes
//       {"depth", "batch": [...], "seconds": [...], "seconds_last": [...], "spread": [...], "sample_s",
//       "draft_sample_s", "depth_lo", "seconds_lo", "spread_lo"} (the last three: a batch of one at DEPTH/2).
//
//   specreg-replay forced TRANSCRIPT.json OUT.json [llama.cpp options: -m DRAFT -c N ...]   (env SPECREG_FORCED=MAXK,PMIN,ENDED)
//       The fast path for draft models: one teacher-forced pass of the draft over prompt + transcript. Up to
//       its first miss a draft step sees exactly the true prefix (the draft's context holds the prompt and the
//       accepted tokens, then id_last is decoded [sp:383-386]), so the draft's top token and its probability
//       at every transcript position, taken with the draft's own sampler (top-k 10 [sp:277-278], candidates
//       sorted, p as p-min compares it [sp:409-421]), decide every step's accepted count for every K and
//       p-min at once. What the draft proposes after a miss needs its own continuation: where the miss was
//       confident enough to be drafted (p >= PMIN > 0), the continuation's probabilities are taken too, up to
//       MAXK - 1 tokens or the first below PMIN. Writes {"top": [...], "p": [...], "gap": [...], "cont": [[i, p1, ...],
//       ...]} (gap: the top token's probability minus the second's; a small gap is a near-tie that the replay's
//       smaller batches may break the other way).
//       runner/forced.py turns that into the replay's steps; tests/runner/test_replay.py checks both agree.
//
//   specreg-replay probe OUT.json [llama.cpp options: -m TARGET [-md DRAFT] --spec-type LIST ...]
//       llama.cpp's own decisions about a pair, for specreg's rules to be tested against: each context's
//       common_context_can_seq_rm kind and n_rs_seq, llama_model_is_recurrent/hybrid/diffusion,
//       common_speculative_are_compatible, and whether common_speculative_init builds a speculator.
//
// The options are parsed by llama.cpp's own common_params_parse(LLAMA_EXAMPLE_SPECULATIVE), so every
// speculative option means what it means to llama-speculative-simple. Lines mirrored from
// speculative-simple.cpp are marked "[ss:LINE]", from common/speculative.cpp "[sp:LINE]" (line numbers of the
// pinned files).

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
    const bool sampled = params.sampling.temp > 0.0f;
    std::vector<std::vector<std::pair<llama_token, float>>> cands;
    int n_past = (int) inp.size();
    const int n_predict = params.n_predict < 0 ? (int) llama_n_ctx(ctx) - n_past : params.n_predict;
    while ((int) out.size() < n_predict && n_past < (int) llama_n_ctx(ctx)) {
        const float * logits = llama_get_logits_ith(ctx, -1);
        const llama_token id = common_sampler_sample(smpl.get(), ctx, -1);
        if (sampled) {  // the sampling distribution after the whole chain (top-k, top-p, min-p, temperature)
            const auto * cur_p = common_sampler_get_candidates(smpl.get(), true);
            std::vector<std::pair<llama_token, float>> row;
            for (size_t k = 0; k < cur_p->size && row.size() < 32 && cur_p->data[k].p > 0.0f; ++k) {
                row.emplace_back(cur_p->data[k].id, cur_p->data[k].p);
            }
            cands.push_back(row);
        }
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
    os << "]";
    if (sampled) {
        os << ", \"cands\": [";
        for (size_t i = 0; i < cands.size(); ++i) {
            os << (i ? "," : "") << "[";
            for (size_t k = 0; k < cands[i].size(); ++k) {
                os << (k ? "," : "") << cands[i][k].first << "," << cands[i][k].second;
            }
            os << "]";
        }
        os << "]";
    }
    os << "}\n";
    return os.good() ? 0 : fail("the transcript could not be written");
}

static int timing(common_params & params, const std::string & out_path) {
    int depth = 128, max_b = 9, reps = 5;
    if (const char * spec = getenv("SPECREG_TIMING")) {
        if (sscanf(spec, "%d,%d,%d", &depth, &max_b, &reps) != 3 || depth < 1 || max_b < 1 || reps < 1) {
            return fail("SPECREG_TIMING must be DEPTH,MAX_BATCH,REPEATS (positive integers)");
        }
    }
    // The batch sizes timed: every one up to MAX_BATCH, or those listed (ascending, 1 to MAX_BATCH): a retake times
    // only the sizes whose repeats spread.
    std::vector<int> sizes;
    if (const char * list = getenv("SPECREG_TIMING_SIZES")) {
        for (const char * p = list; *p != '\0';) {
            char * end = nullptr;
            const long b = strtol(p, &end, 10);
            const bool ascending = sizes.empty() || b > sizes.back();
            if (end == p || b < 1 || b > max_b || !ascending || (*end != ',' && *end != '\0')) {
                return fail("SPECREG_TIMING_SIZES must list ascending batch sizes from 1 to MAX_BATCH");
            }
            sizes.push_back((int) b);
            p = *end == ',' ? end + 1 : end;
        }
    } else {
        for (int b = 1; b <= max_b; ++b) {
            sizes.push_back(b);
        }
    }
    if (sizes.empty()) {
        return fail("SPECREG_TIMING_SIZES lists no batch size");
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
    // A context with recurrent state cannot drop the timed batch's tokens: speculation checkpoints it instead
    // (common/common.cpp's common_context_can_seq_rm, as speculative-simple asks it [ss:69-70]), and so does
    // this timing, which measures what a checkpoint costs on the way.
    const bool use_ckpt = common_context_can_seq_rm(ctx) == COMMON_CONTEXT_SEQ_RM_TYPE_FULL;
    common_batch batch(ctx);
    common_prompt_checkpoint ckpt;
    std::vector<double> save_t, restore_t;
    // The context holds `cur` tokens; fill_to adds tokens up to `d` (their contents do not change the cost, only
    // their number) and, for a checkpointed context, takes the checkpoint there.
    int cur = 0;
    auto fill_to = [&](int d) {
        batch.clear();
        for (int i = cur; i < d; ++i) {
            batch.add((llama_token) ((i * 7919) % n_vocab), i, 0, false);
        }
        if (llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, batch.get()) != 0) {
            return false;
        }
        cur = d;
        if (use_ckpt) {
            ckpt.update_pos(cur, 0, cur - 1);
            ckpt.update_tgt(ctx, 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
        }
        return true;
    };
    // A decode attends over the KV cache's used cells padded to a multiple of 256 (src/llama-kv-cache.cpp,
    // get_n_kv), so the context's length changes a decode's cost in steps: a batch at DEPTH 256 attends over 512
    // cells, one at 128 over 256. A batch of one is timed at DEPTH/2 too, right before the context grows to DEPTH:
    // the step between the two prices each task at its own context (runner.predict.prediction, CostModel.at_context).
    const int lo = depth / 2;
    if (!fill_to(lo >= 1 ? lo : depth)) {
        return fail("decoding the context failed");
    }
    // Back to the context after a timed batch: remove its tokens, or restore the checkpoint [ss:274-276] (timed:
    // a round that is only partly accepted pays it), after saving one as each round does before verifying [ss:208].
    auto back_to_depth = [&]() {
        if (!use_ckpt) {
            llama_memory_seq_rm(llama_get_memory(ctx), 0, cur, -1);
            return;
        }
        const int64_t t0 = ggml_time_us();
        ckpt.load_tgt(ctx, 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
        llama_memory_seq_rm(llama_get_memory(ctx), 0, ckpt.pos_max + 1, -1);
        const int64_t t1 = ggml_time_us();
        ckpt.update_tgt(ctx, 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
        const int64_t t2 = ggml_time_us();
        restore_t.push_back((t1 - t0) / 1e6);
        save_t.push_back((t2 - t1) / 1e6);
    };
    // every_output: a verify batch [ss:223-228] computes every token's logits; a draft model fed the target's
    // batch (draft-simple's process() [sp:304-312]) computes only the last token's, which skips the output layer
    // for the others (a quarter of a small model's work with a 152k vocabulary).
    auto decode_seconds = [&](int b, bool every_output, double & out) {
        batch.clear();
        for (int i = 0; i < b; ++i) {
            batch.add((llama_token) (((cur + i) * 104729) % n_vocab), cur + i, 0, every_output || i == b - 1);
        }
        const int64_t t0 = ggml_time_us();
        if (llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, batch.get()) != 0) {
            return false;
        }
        llama_get_logits_ith(ctx, -1);  // the logits are ready: the decode is complete
        const int64_t t1 = ggml_time_us();
        back_to_depth();
        out = (t1 - t0) / 1e6;
        return true;
    };
    // One untimed pass over every size first: the first seconds after a model is mapped in are slow (pages still
    // faulting in), which once put 25% on the batch of one alone. Then each size is timed in a run of its own, as
    // plain decoding repeats its batch of one (timed round robin, after other sizes, a batch of one measured 15%
    // slower than plain decoding runs).
    double unused = 0;
    for (const int b : sizes) {
        if (!decode_seconds(b, true, unused) || (b > 1 && !decode_seconds(b, false, unused))) {
            return fail("decoding a batch failed");
        }
    }
    std::vector<double> lo_t;
    if (lo >= 1) {
        for (int r = 0; r <= reps; ++r) {  // the first warms up and is not counted
            double t = 0;
            if (!decode_seconds(1, true, t)) {
                return fail("decoding a batch failed");
            }
            if (r > 0) {
                lo_t.push_back(t);
            }
        }
        if (!fill_to(depth)) {
            return fail("decoding the context failed");
        }
    }
    std::vector<std::vector<double>> every_t(sizes.size()), last_t(sizes.size());
    for (size_t k = 0; k < sizes.size(); ++k) {
        const int b = sizes[k];
        for (int pass = 0; pass < 2; ++pass) {
            const bool every = pass == 0;
            if (!every && b == 1) {
                last_t[k] = every_t[k];  // a batch of one has one output either way
                continue;
            }
            for (int r = 0; r <= reps; ++r) {  // the first of each run warms up and is not counted
                double t = 0;
                if (!decode_seconds(b, every, t)) {
                    return fail("decoding a batch failed");
                }
                if (r > 0) {
                    (every ? every_t : last_t)[k].push_back(t);
                }
            }
        }
    }
    auto median = [](std::vector<double> t) {
        std::sort(t.begin(), t.end());
        return t[t.size() / 2];
    };
    // How far each batch's repeats lie apart: (third quartile - first) / median. A quiet machine's repeats agree;
    // specreg keeps no timing whose repeats do not as the machine's figure (runner.predict.conditions).
    auto spread = [](std::vector<double> t) {
        std::sort(t.begin(), t.end());
        const double mid = t[t.size() / 2];
        return mid > 0 ? (t[(3 * t.size()) / 4] - t[t.size() / 4]) / mid : 0.0;
    };
    std::vector<double> seconds, seconds_last, spreads;
    for (size_t k = 0; k < sizes.size(); ++k) {
        seconds.push_back(median(every_t[k]));
        seconds_last.push_back(median(last_t[k]));
        spreads.push_back(spread(every_t[k]));
    }
    // Sampling, which a step pays besides its decodes: the target samples every verified position with the run's
    // own chain (speculative-simple.cpp: common_sampler_sample_and_accept_n), plain decoding one per token, and
    // draft-simple samples every drafted token with a top-k 10 chain (common/speculative.cpp, the draft's sampler).
    // Timed on one real position's logits; the chain's cost is the vocabulary's size, not the values.
    batch.clear();
    batch.add((llama_token) (depth % n_vocab), depth, 0, true);
    if (llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, batch.get()) != 0) {
        return fail("decoding a batch failed");
    }
    common_params_sampling draft_params = params.sampling;
    draft_params.top_k = 10;
    draft_params.samplers.assign(1, COMMON_SAMPLER_TYPE_TOP_K);
    auto sample_seconds = [&](common_params_sampling sp) {
        common_sampler_ptr smpl(common_sampler_init(model, sp));
        std::vector<double> t;
        for (int r = 0; r <= 4 * reps; ++r) {  // the first call warms up and is not counted
            const int64_t t0 = ggml_time_us();
            common_sampler_sample(smpl.get(), ctx, 0);
            const int64_t t1 = ggml_time_us();
            if (r > 0) {
                t.push_back((t1 - t0) / 1e6);
            }
        }
        std::sort(t.begin(), t.end());
        return t[t.size() / 2];
    };
    const double sample_s = sample_seconds(params.sampling);
    const double draft_sample_s = sample_seconds(draft_params);
    std::ofstream os(out_path);
    os << "{\"sample_s\": " << sample_s << ", \"draft_sample_s\": " << draft_sample_s;
    if (use_ckpt) {  // the first few are the warm-up passes': the median of the rest
        save_t.erase(save_t.begin(), save_t.begin() + std::min<size_t>(save_t.size() / 4, save_t.size()));
        restore_t.erase(restore_t.begin(), restore_t.begin() + std::min<size_t>(restore_t.size() / 4, restore_t.size()));
        os << ", \"checkpoint\": {\"save_s\": " << median(save_t) << ", \"restore_s\": " << median(restore_t)
           << ", \"bytes\": " << ckpt.data_tgt.size() << "}";
    }
    if (!lo_t.empty()) {
        os << ", \"depth_lo\": " << lo << ", \"seconds_lo\": " << median(lo_t) << ", \"spread_lo\": " << spread(lo_t);
    }
    os << ", \"depth\": " << depth << ", \"batch\": [";
    for (size_t k = 0; k < sizes.size(); ++k) {
        os << (k ? "," : "") << sizes[k];
    }
    os << "], \"seconds\": [";
    for (size_t i = 0; i < seconds.size(); ++i) {
        os << (i ? "," : "") << seconds[i];
    }
    os << "], \"seconds_last\": [";
    for (size_t i = 0; i < seconds_last.size(); ++i) {
        os << (i ? "," : "") << seconds_last[i];
    }
    os << "], \"spread\": [";
    for (size_t i = 0; i < spreads.size(); ++i) {
        os << (i ? "," : "") << spreads[i];
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

    // [ss:69-70] a context that cannot remove part of a sequence (recurrent or hybrid state) speculates with
    // checkpoints. Asked before the prompt, as there: each answer decodes two tokens and clears the context (the only
    // decode this tool makes with the target).
    const bool use_ckpt_tgt = common_context_can_seq_rm(ctx_tgt) == COMMON_CONTEXT_SEQ_RM_TYPE_FULL;
    const bool use_ckpt_dft = common_context_can_seq_rm(ctx_dft) == COMMON_CONTEXT_SEQ_RM_TYPE_FULL;
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
    std::vector<int> replays;  // per step: the tokens passed through the target again after a checkpoint restore
    std::vector<int> drafters;  // per step: 1 when the draft model drafted it, 0 when another speculator (an n-gram)
    bool model_drafted = false;

    common_prompt_checkpoint ckpt;

    while (true) {
        if (draft.empty()) {
            // [ss:176-183] the checkpoint's position (the real run reads it from the target's memory, which stays
            // empty here: the last position is n_past - 1) and the draft context's state
            ckpt.update_pos((int64_t) prompt_tgt.size(), 0, n_past - 1);
            if (use_ckpt_dft) {
                ckpt.update_dft(ctx_dft, seq_id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
            }
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
            // In a chain the first speculator with a draft is used [sp:2891-2915]: whether the draft model decoded
            // (its context's decode counts moved) says which one drafted this round, for the cost model.
            const auto evals = [&]() {
                const auto d = llama_perf_context(ctx_dft);
                return ctx_dft ? (int64_t) d.n_eval + d.n_p_eval : 0;
            };
            const int64_t evals_before = evals();
            common_speculative_draft(spec);
            model_drafted = evals() != evals_before;

            // [ss:212-219] the draft context goes back to the target's last position before verification
            if (ctx_dft) {
                if (use_ckpt_dft) {
                    ckpt.load_dft(ctx_dft, seq_id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
                }
                llama_memory_seq_rm(llama_get_memory(ctx_dft), seq_id, ckpt.pos_max + 1, -1);
            }
        }
        // else [ss:220-225]: the accepted tokens of a partly accepted draft, passed through the target again
        const bool is_replay = use_ckpt_tgt && !replays.empty() && replays.back() < 0;

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
        if (is_replay) {
            replays.back() = (int) n_draft;  // the replayed tokens: what the target decodes again, besides id_last
        } else {
            // the real counts (llama-server's, and the runner's per-round count): each fresh draft once
            n_drafted += (int) n_draft;
            n_accept += (int) n_acc;
            steps.emplace_back((int) n_draft, (int) n_acc);
            replays.push_back(0);
            drafters.push_back(model_drafted ? 1 : 0);
        }
        // [ss:266-289] partial acceptance on a checkpointed target: restore the checkpoint and make the accepted
        // tokens (and the target's own) the next round's draft. Nothing is emitted yet, so the transcript position
        // stays where it was.
        if (use_ckpt_tgt && !is_replay && n_acc < n_draft) {
            at -= ids.size();
            draft = std::move(ids);
            if (ctx_dft) {
                ckpt.load_dft(ctx_dft, seq_id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
                llama_memory_seq_rm(llama_get_memory(ctx_dft), seq_id, ckpt.pos_max + 1, -1);
            }
            prompt_tgt.resize((size_t) ckpt.n_tokens);
            n_past = (int) prompt_tgt.size();
            replays.back() = -1;  // the next round replays
            continue;
        }
        common_speculative_accept(spec, seq_id, (uint16_t) (is_replay ? n_draft : n_acc));  // [ss:292]
        n_past += (int) (is_replay ? n_draft : n_acc);                                       // [ss:295-298]
        n_predict += (int) ids.size();

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

    printf("{\"n_predict\": %d, \"n_drafted\": %d, \"n_accept\": %d, \"checkpoints\": {\"target\": %s, "
           "\"draft\": %s}, \"steps\": [",
           n_predict, n_drafted, n_accept, use_ckpt_tgt ? "true" : "false", use_ckpt_dft ? "true" : "false");
    for (size_t i = 0; i < steps.size(); ++i) {
        printf("%s[%d,%d]", i ? "," : "", steps[i].first, steps[i].second);
    }
    printf("], \"replays\": [");
    for (size_t i = 0; i < replays.size(); ++i) {
        printf("%s%d", i ? "," : "", std::max(replays[i], 0));
    }
    printf("], \"drafters\": [");
    for (size_t i = 0; i < drafters.size(); ++i) {
        printf("%s%d", i ? "," : "", drafters[i]);
    }
    printf("]}\n");
    return 0;
}

// The draft's own continuation [sp:433-453]: `tok` decoded at `pos` on sequence `seq`, then each next top token,
// writing the probability of each (",p") for up to `n` of them, or up to the first below `p_cont`.
static bool continuation(llama_context * ctx, common_sampler * smpl, common_batch & batch, llama_token tok,
                         llama_pos pos, llama_seq_id seq, int n, float p_cont, std::ostream & os) {
    for (int c = 0; c < n; ++c) {
        batch.clear();
        batch.add(tok, pos + c, seq, true);
        if (llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, batch.get()) != 0) {
            return false;
        }
        common_sampler_reset(smpl);
        common_sampler_sample(smpl, ctx, 0, true);
        const auto * cur_p = common_sampler_get_candidates(smpl, true);
        os << "," << cur_p->data[0].p;
        tok = cur_p->data[0].id;
        if (cur_p->data[0].p < p_cont) {
            break;
        }
    }
    return true;
}

static int forced(common_params & params, const std::string & transcript_path, const std::string & out_path) {
    std::ifstream is(transcript_path);
    std::stringstream text;
    text << is.rdbuf();
    std::vector<llama_token> inp, truth;
    if (!read_ints(text.str(), "prompt", inp) || !read_ints(text.str(), "tokens", truth) || inp.empty() ||
        truth.empty()) {
        return fail("the transcript has no prompt or tokens");
    }
    int max_k = 8;
    float p_cont = 0.0f;
    // ENDED: the transcript stops at the *target's* end of generation. The target decides that, not this model:
    // an adapted draft may not count the target's end token as one of its own.
    int ended = 0;
    if (const char * spec = getenv("SPECREG_FORCED")) {
        if (sscanf(spec, "%d,%f,%d", &max_k, &p_cont, &ended) != 3 || max_k < 1 || max_k > 1024 ||
            !(p_cont >= 0.0f) || (ended != 0 && ended != 1)) {
            return fail("SPECREG_FORCED must be MAXK,PMIN,ENDED (a positive integer, a probability, 0 or 1)");
        }
    }
    // Transcript tokens are decoded CHUNK at a time (env SPECREG_FORCED_CHUNK, default 1): the real draft takes
    // each proposal's logits from a one-token decode [sp:386, 451], and a batched matrix product rounds
    // differently, which flips near-ties (seen: SmolLM2 drafting for itself lost 2 of 19 tokens at 128).
    int step = 1;
    if (const char * spec = getenv("SPECREG_FORCED_CHUNK")) {
        step = std::max(1, std::min(128, atoi(spec)));
    }
    const int chunk = 128;  // outputs per decode: every one holds a row of logits (n_vocab floats)
    params.n_batch = std::max(params.n_batch, chunk);
    params.n_outputs_max = chunk;
    params.n_outputs_max_per_seq = chunk;
    params.n_parallel = 2;  // sequence 1 holds a continuation after a miss, sharing sequence 0's prefix
    params.kv_unified = true;
    auto init = common_init_from_params(params);
    llama_model * model = init->model();
    llama_context * ctx = init->context();
    if (model == nullptr || ctx == nullptr) {
        return fail("the draft model could not be loaded");
    }
    std::vector<llama_token> seq(inp);
    seq.insert(seq.end(), truth.begin(), truth.end());
    if ((int) seq.size() + max_k + 2 >= (int) llama_n_ctx(ctx)) {
        return fail("prompt + transcript + MAXK do not fit the context (-c)");
    }
    common_params_sampling sp;  // the draft's sampler [sp:275-279]
    sp.no_perf = false;
    sp.top_k = 10;
    sp.samplers.assign(1, COMMON_SAMPLER_TYPE_TOP_K);
    common_sampler_ptr smpl(common_sampler_init(model, sp));

    const size_t first = inp.size() - 1;  // the logits after this token propose transcript token 0
    std::vector<llama_token> top(truth.size());
    std::vector<float> prob(truth.size()), gap(truth.size());
    llama_token top_end = 0;  // after the transcript's last token: what the draft proposes past the end
    float p_end = 0.0f;
    common_batch batch(ctx);
    for (size_t start = 0, end = 0; start < seq.size(); start = end) {
        // the prompt in large batches, as the draft receives it [ss:130-141]; then the transcript STEP at a time
        end = std::min(seq.size(), start + (start + 1 < inp.size() ? std::min<size_t>(chunk, inp.size() - 1 - start) : step));
        batch.clear();
        for (size_t i = start; i < end; ++i) {
            batch.add(seq[i], (llama_pos) i, 0, i >= first);
        }
        if (llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, batch.get()) != 0) {
            return fail("decoding prompt and transcript failed");
        }
        for (size_t i = std::max(start, first); i < end; ++i) {
            common_sampler_reset(smpl.get());
            common_sampler_sample(smpl.get(), ctx, (int) (i - start), true);
            const auto * cur_p = common_sampler_get_candidates(smpl.get(), true);
            if (i - first == truth.size()) {
                top_end = cur_p->data[0].id;
                p_end = cur_p->data[0].p;
                continue;
            }
            top[i - first] = cur_p->data[0].id;
            prob[i - first] = cur_p->data[0].p;
            gap[i - first] = cur_p->size > 1 ? cur_p->data[0].p - cur_p->data[1].p : 1.0f;
        }
    }

    std::ofstream os(out_path);
    os << "{\"top\": ";
    json_tokens(os, top);
    os << ", \"p\": [";
    for (size_t i = 0; i < prob.size(); ++i) {
        os << (i ? "," : "") << prob[i];
    }
    os << "], \"gap\": [";
    for (size_t i = 0; i < gap.size(); ++i) {
        os << (i ? "," : "") << gap[i];
    }
    os << "], \"cont\": [";
    llama_memory_t mem = llama_get_memory(ctx);
    bool any = false;
    for (size_t i = 0; p_cont > 0.0f && i < truth.size(); ++i) {
        if (top[i] == truth[i] || prob[i] < p_cont) {
            continue;  // a hit, or a miss the draft does not propose at this p-min: no continuation
        }
        // the wrong token is decoded after the true prefix and the draft goes on from there
        const llama_pos pos = (llama_pos) (first + 1 + i);
        llama_memory_seq_rm(mem, 1, -1, -1);
        llama_memory_seq_cp(mem, 0, 1, 0, pos);
        os << (any ? "," : "") << "[" << i;
        any = true;
        if (!continuation(ctx, smpl.get(), batch, top[i], pos, 1, max_k - 1, p_cont, os)) {
            return fail("decoding a continuation failed");
        }
        os << "]";
    }
    // A transcript that ends at the target's end of generation: a draft that matched that token drafts on
    // past it with its own tokens (the verify step stops at it [ss:258], the drafted count does not); those
    // continue the entry of the last position.
    if (p_cont > 0.0f && top.back() == truth.back() && ended) {
        os << (any ? "," : "") << "[" << truth.size() - 1 << "," << p_end;
        if (p_end >= p_cont &&
            !continuation(ctx, smpl.get(), batch, top_end, (llama_pos) seq.size(), 0, max_k - 2, p_cont, os)) {
            return fail("decoding past the end failed");
        }
        os << "]";
    }
    os << "]}\n";
    return os.good() ? 0 : fail("the forced pass could not be written");
}

static const char * seq_rm_kind(llama_context * ctx) {
    switch (common_context_can_seq_rm(ctx)) {
        case COMMON_CONTEXT_SEQ_RM_TYPE_NO:   return "no";
        case COMMON_CONTEXT_SEQ_RM_TYPE_PART: return "part";
        case COMMON_CONTEXT_SEQ_RM_TYPE_FULL: return "full";
        case COMMON_CONTEXT_SEQ_RM_TYPE_RS:   return "rs";
    }
    return "unknown";
}

// The architecture's kind as libllama reports it: JSON fields, without braces.
static void arch_fields(std::ostream & os, const llama_model * model) {
    os << "\"recurrent\": " << (llama_model_is_recurrent(model) ? "true" : "false")
       << ", \"hybrid\": " << (llama_model_is_hybrid(model) ? "true" : "false")
       << ", \"diffusion\": " << (llama_model_is_diffusion(model) ? "true" : "false");
}

static void json_model(std::ostream & os, const llama_model * model, llama_context * ctx) {
    os << "{\"kind\": \"" << seq_rm_kind(ctx) << "\", \"n_rs_seq\": " << llama_n_rs_seq(ctx) << ", ";
    arch_fields(os, model);
    os << "}";
}

// SPECREG_PROBE=vocab: headers alone (a file without its weights): both models loaded vocabulary-only, and only
// what that decides: the architecture's kind and common_speculative_are_compatible.
static int probe_vocab(common_params & params, const std::string & out_path) {
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model_ptr tgt(llama_model_load_from_file(params.model.path.c_str(), mp));
    llama_model_ptr dft(llama_model_load_from_file(params.speculative.draft.mparams.path.c_str(), mp));
    if (!tgt || !dft) {
        return fail("a model's header could not be loaded");
    }
    std::ofstream os(out_path);
    os << "{\"target\": {";
    arch_fields(os, tgt.get());
    os << "}, \"draft\": {";
    arch_fields(os, dft.get());
    os << "}, \"are_compatible\": " << (common_speculative_are_compatible(tgt.get(), dft.get()) ? "true" : "false")
       << "}\n";
    return os.good() ? 0 : fail("the probe could not be written");
}

// llama.cpp's own decisions about a pair, for specreg's rules to be checked against: each context's
// common_context_can_seq_rm kind (the target's created with the method list's n_rs_seq, the draft's as
// common_speculative_init_from_params creates it), common_speculative_are_compatible, and whether
// common_speculative_init builds a speculator for the --spec-type list (and which error it throws if not).
static int probe(common_params & params, const std::string & out_path) {
    if (const char * how = getenv("SPECREG_PROBE"); how != nullptr && strcmp(how, "vocab") == 0) {
        return probe_vocab(params, out_path);
    }
    auto init = common_init_from_params(params);
    llama_model * model_tgt = init->model();
    llama_context * ctx_tgt = init->context();
    if (model_tgt == nullptr || ctx_tgt == nullptr) {
        return fail("the target model could not be loaded");
    }
    std::ofstream os(out_path);
    os << "{\"target\": ";
    json_model(os, model_tgt, ctx_tgt);
    common_params params_dft = common_base_params_to_speculative(params);
    auto spec_init = common_speculative_init_from_params(params_dft, model_tgt, ctx_tgt);
    llama_context * ctx_dft = spec_init->context();
    os << ", \"draft\": ";
    if (ctx_dft != nullptr) {
        json_model(os, llama_get_model(ctx_dft), ctx_dft);
    } else {
        os << "null";
    }
    const llama_model * model_dft = spec_init->model();
    os << ", \"are_compatible\": "
       << (model_dft == nullptr ? "null" : common_speculative_are_compatible(model_tgt, model_dft) ? "true" : "false");
    params.speculative.draft.ctx_tgt = ctx_tgt;
    params.speculative.draft.ctx_dft = ctx_dft;
    std::string error;
    common_speculative * spec = nullptr;
    try {
        spec = common_speculative_init(params.speculative, 1);
    } catch (const std::exception & e) {
        error = e.what();
    }
    os << ", \"speculator\": " << (spec != nullptr ? "true" : "false") << ", \"error\": \"";
    for (const char c : error) {
        if (c == '"' || c == '\\') {
            os << '\\';
        }
        if (static_cast<unsigned char>(c) >= 0x20) {
            os << c;
        }
    }
    os << "\"}\n";
    common_speculative_free(spec);
    return os.good() ? 0 : fail("the probe could not be written");
}

int main(int argc, char ** argv) {
    std::setlocale(LC_NUMERIC, "C");
    if (argc < 3 || (strcmp(argv[1], "transcript") != 0 && strcmp(argv[1], "replay") != 0 &&
                     strcmp(argv[1], "timing") != 0 && strcmp(argv[1], "forced") != 0 &&
                     strcmp(argv[1], "probe") != 0)) {
        fprintf(stderr, "usage: specreg-replay transcript OUT.json|replay TRANSCRIPT.json|timing OUT.json|"
                        "forced TRANSCRIPT.json OUT.json|probe OUT.json [llama.cpp options]\n");
        return 2;
    }
    const std::string mode = argv[1], path = argv[2];
    const int ours = mode == "forced" ? 4 : 3;  // forced takes a second path
    if (argc < ours) {
        return fail("forced needs TRANSCRIPT.json and OUT.json");
    }
    const std::string out_path = mode == "forced" ? argv[3] : "";
    // llama.cpp's parser sees argv[0] and the options after our words
    std::vector<char *> rest = {argv[0]};
    for (int i = ours; i < argc; ++i) {
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
           : mode == "forced"     ? forced(params, path, out_path)
           : mode == "probe"      ? probe(params, path)
                                  : replay(params, path);
    } catch (const std::exception & e) {  // llama.cpp's own refusals (an incompatible draft) are exceptions
        rc = fail(e.what());
    }
    llama_backend_free();
    return rc;
}
