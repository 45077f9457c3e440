// The P̄V view: the row of `bitexact bias mechanism` (ties at the maximum,
// V of negative mean), its running Ō[0, col] and error after each key under
// the paper's arithmetic and the H100 kernel's, standard and stabilized, all
// computed by the library (web/wasm/pv_accumulation.cpp): a plot of the
// errors, the command's report, and every event with its trace on a click.
"use strict";

// The command's defaults but the seed: its row 1 is one of 7 rows of seeds 1-40 where the paper's stabilized
// pass ends farther from 0 than the standard one, a chance of where the bf16 stores fall; row 5 is a common case.
const PV_OPTIONS = [  // element id, the command's option, default
  ["pv-keys", "--keys", "1024"], ["pv-ties", "--ties", "16"], ["pv-tie-positions", "--tie-positions", ""],
  ["pv-max", "--max", "8"], ["pv-gap-min", "--gap-min", "8"], ["pv-gap-max", "--gap-max", "64"],
  ["pv-v-mean", "--v-mean", "-2"], ["pv-v-sd", "--v-sd", "0.5"], ["pv-seed", "--seed", "5"], ["pv-col", "--col", "0"],
];
const PV_TABLE_FILES = ["mufu_ex2.bxt", "mufu_rcp.bxt", "mufu_lg2.bxt"];
const PV_CURVE_NAMES = ["paper, standard", "paper, stabilized", "H100 kernel, standard", "H100 kernel, stabilized"];
const SVG_NS = "http://www.w3.org/2000/svg";

class PvAccumulationView {
  constructor(library) {
    this.library = library;
    this.tablesLoaded = null;  // a promise, once the first run asked for the tables
    this.result = null;
    this.status = document.getElementById("pv-status");
    this.curveSelect = document.getElementById("pv-curve");
    fillSelect(this.curveSelect, PV_CURVE_NAMES.map((name, index) => [String(index), name]));
    this.curveSelect.addEventListener("change", () => this.showEvents());
    for (const [id, , value] of PV_OPTIONS) {
      const input = document.getElementById(id);
      input.value = value;
      input.addEventListener("keydown", (event) => { if (event.key === "Enter") this.run(); });
    }
    document.getElementById("pv-run").addEventListener("click", () => this.run());
  }

  // The kernel's MUFU tables, fetched from the page's folder into the module's /bitexact-data once.
  loadTables() {
    if (!this.tablesLoaded) {
      this.status.textContent = "fetching the MUFU tables (ex2, rcp, lg2) ...";
      this.tablesLoaded = Promise.all(PV_TABLE_FILES.map((name) => fetch(name).then((response) => {
        if (!response.ok) throw new Error(`${name}: HTTP ${response.status}`);
        return response.arrayBuffer();
      }))).then((buffers) => {
        this.library.module.FS.mkdirTree("/bitexact-data");
        buffers.forEach((buffer, i) =>
          this.library.module.FS.writeFile("/bitexact-data/" + PV_TABLE_FILES[i], new Uint8Array(buffer)));
        const loaded = this.library.call("bitexact_load_mufu_tables");
        if (loaded.error) throw new Error(loaded.error);
        for (const name of PV_TABLE_FILES) this.library.module.FS.unlink("/bitexact-data/" + name);
      });
    }
    return this.tablesLoaded;
  }

  // The command line the page runs, for the reader to repeat it.
  commandLine() {
    const parts = ["bitexact bias mechanism"];
    for (const [id, option] of PV_OPTIONS) {
      const value = document.getElementById(id).value.trim();
      if (option === "--ties" && document.getElementById("pv-tie-positions").value.trim()) continue;
      if (value !== "") parts.push(option, value);
    }
    return parts.join(" ");
  }

  run() {
    const view = document.getElementById("pv-view");
    view.dataset.state = "running";
    return this.loadTables().then(() => {
      this.status.textContent = "computing ...";
      // Let the status paint before the synchronous computation.
      return new Promise((resolve) => setTimeout(resolve, 0));
    }).then(() => {
      const value = (id) => document.getElementById(id).value.trim();
      const started = performance.now();
      const result = this.library.call("bitexact_pv_accumulation", Number(value("pv-keys")), Number(value("pv-ties")),
                                       value("pv-tie-positions"), Number(value("pv-max")), Number(value("pv-gap-min")),
                                       Number(value("pv-gap-max")), Number(value("pv-v-mean")), Number(value("pv-v-sd")),
                                       value("pv-seed"), Number(value("pv-col")));
      document.getElementById("pv-command").textContent = this.commandLine();
      if (result.error) {
        this.status.textContent = result.error;
        this.status.className = "error";
        view.dataset.state = "error";
        return;
      }
      this.result = result;
      this.status.className = "note";
      this.status.textContent = `computed in ${Math.round(performance.now() - started)} ms`;
      document.getElementById("pv-report").textContent = result.report;
      this.plot();
      this.describeEnds();
      this.showEvents();
      this.selectFirstTie();
      view.dataset.state = "done";
      view.dataset.command = this.commandLine();
    }).catch((error) => {
      this.status.textContent = String(error.message || error);
      this.status.className = "error";
      view.dataset.state = "error";
      this.tablesLoaded = null;
    });
  }

  // Two panels, the paper's arithmetic and the kernel's: error of Ō after each held event, P̄ = 1 keys marked.
  plot() {
    const svg = document.getElementById("pv-plot");
    svg.textContent = "";
    this.scales = {};  // per panel's first curve: its x and y, to mark the event selected
    const panelWidth = 560, panelHeight = 300, margin = {left: 96, right: 16, top: 40, bottom: 46};
    svg.setAttribute("viewBox", `0 0 ${2 * panelWidth} ${panelHeight}`);
    [["paper_reference: the paper's PyTorch code", 0], ["pytorch_sdpa_flash_sm90: the H100 kernel", 2]].forEach(
        ([title, first], panel) => {
          const curves = [first, first + 1].map((index) => this.result.curves[index]);
          const points = curves.map((curve) => [[0, 0], ...curve.events.filter((e) => e.error !== undefined)
                                                              .map((e) => [e.keys_added, Number(e.error)])]);
          const all = points.flat();
          let low = Math.min(...all.map((p) => p[1])), high = Math.max(...all.map((p) => p[1]));
          if (low === high) low -= 1, high += 1;
          const pad = (high - low) * 0.06;
          low -= pad, high += pad;
          const x0 = panel * panelWidth + margin.left, x1 = (panel + 1) * panelWidth - margin.right;
          const y0 = panelHeight - margin.bottom, y1 = margin.top;
          const x = (k) => x0 + (x1 - x0) * k / this.result.keys, y = (e) => y0 + (y1 - y0) * (e - low) / (high - low);
          this.scales[first] = this.scales[first + 1] = {x, y};
          this.svgText(svg, (x0 + x1) / 2, 18, title, "plot-title");
          this.svgText(svg, (x0 + x1) / 2, panelHeight - 8, "keys added, in the order this arithmetic adds them", "axis-label");
          // The y axis: Ō's error as the events' error column has it, in Ō's (and V's) units.
          [["error of the running Ō", 18], ["(value − exact, units of V)", 34]].forEach(([label, dx]) => {
            const yLabel = panel * panelWidth + dx, yMiddle = (y0 + y1) / 2;
            this.svgText(svg, yLabel, yMiddle, label, "axis-label y").setAttribute("transform", `rotate(-90 ${yLabel} ${yMiddle})`);
          });
          for (const tick of niceTicks(low, high, 5)) {
            this.svgLine(svg, x0, y(tick), x1, y(tick), "grid");
            this.svgText(svg, x0 - 6, y(tick) + 4, formatTick(tick), "tick-label y");
          }
          for (const tick of niceTicks(0, this.result.keys, 6)) {
            this.svgLine(svg, x(tick), y0, x(tick), y0 + 5, "axis");
            this.svgText(svg, x(tick), y0 + 18, String(tick), "tick-label");
          }
          this.svgLine(svg, x0, y(0), x1, y(0), "zero");
          this.svgLine(svg, x0, y0, x1, y0, "axis");
          this.svgLine(svg, x0, y0, x0, y1, "axis");
          curves.forEach((curve, n) => {
            const line = document.createElementNS(SVG_NS, "polyline");
            line.setAttribute("points", points[n].map(([k, e]) => `${x(k).toFixed(2)},${y(e).toFixed(2)}`).join(" "));
            line.setAttribute("class", "curve " + curve.pass);
            svg.appendChild(line);
            // The keys where P̄ = 1 enters: ticks under the axis, one row per pass.
            for (const e of curve.events.filter((e) => e.p_bar_is_one === 1))
              this.svgLine(svg, x(e.keys_added), y0 - 4 - 6 * n, x(e.keys_added), y0 - 10 - 6 * n, "tie " + curve.pass);
          });
          // The legend at the top left, or at the bottom left where the curves' left part runs in the upper half.
          const left = points.flat().filter(([k]) => k <= 0.45 * this.result.keys);
          const upper = left.filter(([, e]) => y(e) < (y0 + y1) / 2).length;
          this.legend(svg, x0 + 10, upper > left.length / 2 ? y0 - 76 : y1 + 4);
          // A click picks the nearest event with a trace, in the standard pass.
          const hit = document.createElementNS(SVG_NS, "rect");
          hit.setAttribute("x", x0), hit.setAttribute("y", y1);
          hit.setAttribute("width", x1 - x0), hit.setAttribute("height", y0 - y1);
          hit.setAttribute("class", "hit");
          hit.addEventListener("click", (event) => {
            const box = svg.getBoundingClientRect();
            const clicked = (event.clientX - box.left) * (2 * panelWidth) / box.width;
            const keys = (clicked - x0) / (x1 - x0) * this.result.keys;
            this.selectNearest(first, keys);
          });
          svg.appendChild(hit);
        });
  }

  // Under the caption: where each of the four curves ends, and on what Ō (the library's values, shortened).
  describeEnds() {
    const end = (index) => {
      const last = this.result.curves[index].events.filter((e) => e.error !== undefined).pop();
      const short = (text) => String(Number(Number(text).toPrecision(3)));
      return last ? `${last.error.startsWith("-") ? "" : "+"}${short(last.error)} on Ō = ${short(last.value)}` : "no value";
    };
    document.getElementById("pv-ends").textContent =
        `This row ends with an error of ${end(0)} (standard) against ${end(1)} (stabilized) on the paper's code, ` +
        `and ${end(2)} against ${end(3)} on the H100 kernel.`;
  }

  // What a run opens on, as if the reader had clicked its row: in the curve shown (the paper's standard pass at
  // first), the first key with P̄ = 1 whose addition rounds, else the first with P̄ = 1, else the first event traced.
  selectFirstTie() {
    const curveIndex = Number(this.curveSelect.value), events = this.result.curves[curveIndex].events;
    const tie = (e) => e.traced && e.p_bar_is_one === 1;
    let index = events.findIndex((e) => tie(e) && Number(e.jump) !== 0);
    if (index < 0) index = events.findIndex(tie);
    if (index < 0) index = events.findIndex((e) => e.traced);
    if (index >= 0) this.selectEvent(curveIndex, index);
  }

  legend(svg, x, y) {
    [["standard", "standard softmax"], ["stabilized", "stabilized softmax"]].forEach(([pass, label], n) => {
      this.svgLine(svg, x, y + 12 + 16 * n, x + 24, y + 12 + 16 * n, "curve " + pass);
      this.svgText(svg, x + 30, y + 16 + 16 * n, label, "legend");
    });
    this.svgLine(svg, x, y + 42, x, y + 50, "tie standard");
    this.svgText(svg, x + 30, y + 50, "P̄ = 1 (a key tied at the max)", "legend");
  }

  svgLine(svg, xa, ya, xb, yb, className) {
    const line = document.createElementNS(SVG_NS, "line");
    line.setAttribute("x1", xa), line.setAttribute("y1", ya), line.setAttribute("x2", xb), line.setAttribute("y2", yb);
    line.setAttribute("class", className);
    svg.appendChild(line);
  }

  svgText(svg, x, y, text, className) {
    const element = document.createElementNS(SVG_NS, "text");
    element.setAttribute("x", x), element.setAttribute("y", y);
    element.setAttribute("class", className);
    element.textContent = text;
    svg.appendChild(element);
    return element;
  }

  selectNearest(curveIndex, keys) {
    const events = this.result.curves[curveIndex].events;
    let best = -1;
    events.forEach((e, i) => {
      if (e.traced && (best < 0 || Math.abs(e.keys_added - keys) < Math.abs(events[best].keys_added - keys))) best = i;
    });
    this.curveSelect.value = String(curveIndex);
    this.showEvents();
    if (best >= 0) this.selectEvent(curveIndex, best);
  }

  markEvent(curveIndex, e) {
    const svg = document.getElementById("pv-plot");
    let marker = svg.querySelector(".selected-event");
    if (!marker) {
      marker = document.createElementNS(SVG_NS, "circle");
      marker.setAttribute("class", "selected-event");
      marker.setAttribute("r", 5);
      svg.appendChild(marker);
    }
    const {x, y} = this.scales[curveIndex];
    marker.setAttribute("cx", x(e.keys_added));
    marker.setAttribute("cy", y(Number(e.error)));
    marker.style.display = e.error === undefined ? "none" : "";
  }

  // The chosen curve's events, the columns of the command's --csv.
  showEvents() {
    if (!this.result) return;
    const curveIndex = Number(this.curveSelect.value);
    const curve = this.result.curves[curveIndex];
    const body = document.querySelector("#pv-events tbody");
    body.textContent = "";
    body.dataset.semantics = curve.semantics;
    body.dataset.pass = curve.pass;
    const fragment = document.createDocumentFragment();
    curve.events.forEach((e, i) => {
      const tr = document.createElement("tr");
      tr.dataset.event = i;
      const cells = [e.event, e.block, e.key, e.keys_added, e.p_bar_bits, e.p_bar, e.p_bar_is_one, e.v, e.value, e.exact,
                     e.error, e.jump];
      for (const cell of cells) {
        const td = document.createElement("td");
        td.textContent = cell === undefined ? "" : String(cell);
        tr.appendChild(td);
      }
      if (e.p_bar_is_one === 1) tr.classList.add("tie");
      if (e.traced) {
        tr.classList.add("traced");
        tr.addEventListener("click", () => this.selectEvent(curveIndex, i));
      }
      fragment.appendChild(tr);
    });
    body.appendChild(fragment);
  }

  selectEvent(curveIndex, eventIndex) {
    const traced = this.library.call("bitexact_pv_event_trace", curveIndex, eventIndex);
    const e = this.result.curves[curveIndex].events[eventIndex];
    document.getElementById("pv-trace-title").textContent =
        `${PV_CURVE_NAMES[curveIndex]}: ${e.event} ` + (e.key !== undefined ? `at key ${e.key}, ` : "") +
        (e.p_bar_is_one === 1 ? "P̄ = 1 (P̄ V is V), " : "") +
        `keys added ${e.keys_added}, error of Ō after it ${e.error}`;
    const target = document.getElementById("pv-trace");
    if (traced.error) target.textContent = traced.error;
    else renderTrace(target, traced);
    this.markEvent(curveIndex, e);
    const rows = document.querySelectorAll("#pv-events tbody tr");
    rows.forEach((row) => row.classList.toggle("selected", Number(row.dataset.event) === eventIndex));
    // The row into the table's own frame, not the window: the trace above stays where the reader is.
    const row = rows[eventIndex], frame = document.querySelector("#pv-view .events");
    if (row && (row.offsetTop < frame.scrollTop || row.offsetTop + row.offsetHeight > frame.scrollTop + frame.clientHeight))
      frame.scrollTop = row.offsetTop - frame.clientHeight / 2;
  }
}

// About `count` round steps (1, 2 or 5 times a power of ten) covering [low, high].
function niceTicks(low, high, count) {
  const raw = (high - low) / count, power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
  const ticks = [];
  for (let t = Math.ceil(low / step) * step; t <= high + step * 1e-9; t += step) ticks.push(Math.abs(t) < step * 1e-9 ? 0 : t);
  return ticks;
}

function formatTick(value) {
  return value === 0 ? "0" : Math.abs(value) >= 1e-3 && Math.abs(value) < 1e4 ? String(Number(value.toPrecision(3)))
                                                                               : value.toExponential(1);
}
