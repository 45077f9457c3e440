// Loads the library (bitexact.js + bitexact.wasm, built by web/CMakeLists.txt),
// then wires the three views and the tabs between them. Every number the
// page shows comes from a call below; the JavaScript only lays them out.
"use strict";

window.bitexactTimings = {};

// The entry points return JSON text (web/wasm/json_text.hpp); this parses it.
class Library {
  constructor(module) {
    this.module = module;
  }
  call(name, ...args) {
    const types = args.map((arg) => (typeof arg === "number" ? "number" : "string"));
    return JSON.parse(this.module.ccall(name, "string", types, args));
  }
}

function showView(name) {
  for (const view of document.querySelectorAll(".view")) view.hidden = view.id !== name + "-view";
  for (const tab of document.querySelectorAll("nav button")) tab.classList.toggle("active", tab.dataset.view === name);
  if (location.hash !== "#" + name) history.replaceState(null, "", "#" + name);
}

createBitexactModule().then((module) => {
  window.bitexactTimings.module_ready_ms = performance.now();
  const library = new Library(module);
  const addition = new AdditionView(library);
  const table = new TwoBitTableView(library);
  const accumulation = new PvAccumulationView(library);
  let accumulationRan = false;
  const open = (name) => {
    showView(name);
    // The P̄V view fetches 35 MB of tables on its first opening, not before.
    if (name === "pv" && !accumulationRan) accumulationRan = true, accumulation.run();
  };
  for (const tab of document.querySelectorAll("nav button")) tab.addEventListener("click", () => open(tab.dataset.view));
  addition.showExample();
  table.update();
  open(["addition", "table", "pv"].includes(location.hash.slice(1)) ? location.hash.slice(1) : "addition");
  document.body.dataset.ready = "true";
  // For the tests and docs/web.md: what was computed, and how long it took.
  window.bitexactPage = {addition, table, accumulation, open};
}).catch((error) => {
  document.getElementById("load-error").textContent = "The library did not load: " + error;
});
