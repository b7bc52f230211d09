// The benchmark form's time estimate, said again as its values change: the count of llama.cpp processes as
// runner.runs.params.process_count makes it, times the tokens each generates, at the speed the server measured
// (runner.runs.estimate; the page's first sentence is the server's own, in the same words).
(function () {
  "use strict";
  var out = document.getElementById("benchmark-estimate");
  var form = document.getElementById("benchmark-form");
  if (!out || !form || !out.dataset.estimate) return;
  var est = JSON.parse(out.dataset.estimate);

  function numbers(name) {
    var text = (form.elements[name].value || "").replace(/\s/g, "");
    if (!text) return [];
    return text.split(",").filter(Boolean).map(Number);
  }
  function whole(name) {
    return parseInt(form.elements[name].value, 10);
  }
  function duration(s) { // registry.formatting.duration
    if (s < 90) return s.toFixed(0) + " s";
    if (s < 5400) return (s / 60).toFixed(0) + " min";
    return (s / 3600).toFixed(1) + " h";
  }
  function unique(values) {
    return values.filter(function (v, i) { return values.indexOf(v) === i; });
  }

  function sentence() {
    var ks = unique(numbers("ks"));
    var pmins = unique(numbers("p_mins"));
    var temps = numbers("temperatures");
    var repeats = whole("repeats"), nPredict = whole("n_predict"), prompts = whole("prompts_per_type");
    var all = [ks, pmins, temps, [repeats, nPredict, prompts]].every(function (a) {
      return a.every(function (v) { return isFinite(v); });
    });
    if (!all || !ks.length || !temps.length) return "No estimate for these values.";
    if (!pmins.length) pmins = [0, 0.75];
    var top = Math.max.apply(null, ks);
    var planned = unique(ks.concat(est.grid.filter(function (g) { return g > top; })));
    var method = form.elements.method.value || "draft-simple";
    var settings = method in est.fixed ? est.fixed[method] : planned.length * pmins.length;
    var ticked = form.querySelectorAll("input[name=content_types]:checked").length;
    var types = ticked || est.content_types;
    var perSetting = types * temps.length * prompts * repeats * 2 * nPredict * est.seconds_per_token;
    var full = settings * perSetting;
    var bound = est.lower_bound ? "at least " : "about ";
    var fullText = bound + duration(full) + " to measure every setting";
    var first = !form.elements.full_sweep.checked && temps.indexOf(0) >= 0 &&
      est.predictable.indexOf(method) >= 0 && settings > est.measure_best;
    if (!first) return "Estimate: " + fullText + ", from " + est.basis + ".";
    var measured = Math.min(full, est.measure_best * perSetting);
    return "Estimate: " + bound + duration(measured) + " plus the prediction when every setting is predicted first " +
      "and the best " + est.measure_best + " per content type measured; " + fullText + ". From " + est.basis + ".";
  }

  form.addEventListener("input", function () { out.textContent = sentence(); });
  form.addEventListener("change", function () { out.textContent = sentence(); });
})();
