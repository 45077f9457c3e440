// The table view: the paper's table of 2-bit significand additions, replayed
// on bf16 values by the library (web/wasm/two_bit_table.cpp) with the residue
// an fp32 accumulator carries below bf16's last place. Clicking a row shows
// its two roundings traced: the fp32 addition and the store to bf16.
"use strict";

class TwoBitTableView {
  constructor(library) {
    this.library = library;
    this.residue = document.getElementById("residue");
    this.rounding = document.getElementById("table-rounding");
    this.body = document.querySelector("#two-bit-table tbody");
    this.summary = document.getElementById("two-bit-summary");
    fillSelect(this.residue, [["12", "-2^-12 (bitexact demo's)"],
                              ...[9, 10, 11, 13, 16, 20, 22].map((k) => [String(k), `-2^-${k}`]),
                              ["0", "none (the accumulator holds the bf16 value exactly)"]]);
    fillSelect(this.rounding, ROUNDING_MODES);
    this.residue.addEventListener("change", () => this.update());
    this.rounding.addEventListener("change", () => this.update());
    this.selected = [0, 1];
  }

  update() {
    const residue = Number(this.residue.value);
    const table = this.library.call("bitexact_two_bit_table", residue, this.rounding.value);
    this.body.textContent = "";
    for (const row of table.rows) {
      const tr = document.createElement("tr");
      tr.dataset.a = row.a;
      tr.dataset.b = row.b;
      const cells = [`${row.aa} + ${row.bb}`, row.sum, row.rounding_bit, row.fp32_sum, row.guard, row.round, row.sticky,
                     row.bf16, row.direction];
      cells.forEach((text, column) => {
        const td = document.createElement("td");
        td.textContent = text;
        if (column >= 4 && column <= 6) td.className = ["bit-guard", "bit-round", "bit-sticky"][column - 4];
        tr.appendChild(td);
      });
      if (row.direction.startsWith("up")) tr.classList.add("rounded-up");
      if (row.a === this.selected[0] && row.b === this.selected[1]) tr.classList.add("selected");
      tr.addEventListener("click", () => this.select(row.a, row.b));
      this.body.appendChild(tr);
    }
    this.summary.textContent = table.summary + ".";
    this.showTraces();
  }

  select(a, b) {
    this.selected = [a, b];
    for (const tr of this.body.children)
      tr.classList.toggle("selected", Number(tr.dataset.a) === a && Number(tr.dataset.b) === b);
    this.showTraces();
  }

  showTraces() {
    const [a, b] = this.selected;
    const traces = this.library.call("bitexact_two_bit_traces", a, b, Number(this.residue.value), this.rounding.value);
    renderTrace(document.getElementById("two-bit-addition"), traces.addition);
    renderTrace(document.getElementById("two-bit-store"), traces.store);
  }
}
