// The addition view: two operands (typed as the command reads them, or set
// bit by bit), a result format and a rounding mode; the trace of a + b
// computed by the library (web/wasm/addition_trace.cpp) on every change.
"use strict";

const FORMATS = ["fp32", "bf16", "fp16", "tf32", "e5m2", "e4m3"];
const ROUNDING_MODES = [
  ["nearest_even", "nearest, ties to even"],
  ["nearest_away", "nearest, ties away"],
  ["toward_zero", "toward zero"],
  ["upward", "upward (toward +inf)"],
  ["downward", "downward (toward -inf)"],
  ["to_odd", "round to odd"],
];

function fillSelect(select, entries) {
  for (const entry of entries) {
    const [value, label] = Array.isArray(entry) ? entry : [entry, entry];
    const option = document.createElement("option");
    option.value = value;
    option.textContent = label;
    select.appendChild(option);
  }
}

// What the command is given for an operand: FORMAT:TEXT, unless the text names its own format.
function operandArgument(format, text) {
  const trimmed = text.trim();
  return trimmed.includes(":") ? trimmed : format + ":" + trimmed;
}

class AdditionView {
  constructor(library) {
    this.library = library;
    this.operands = ["a", "b"].map((name) => ({
      name,
      format: document.getElementById(name + "-format"),
      text: document.getElementById(name + "-text"),
      bits: document.getElementById(name + "-bits"),
      value: document.getElementById(name + "-value"),
      parsed: null,
    }));
    this.resultFormat = document.getElementById("result-format");
    this.rounding = document.getElementById("rounding");
    this.trace = document.getElementById("trace");
    this.message = document.getElementById("trace-message");
    for (const operand of this.operands) {
      fillSelect(operand.format, FORMATS);
      operand.text.addEventListener("input", () => this.update());
      operand.format.addEventListener("change", () => this.changeFormat(operand));
    }
    fillSelect(this.resultFormat, [["", "the operands' format"], ...FORMATS]);
    fillSelect(this.rounding, ROUNDING_MODES);
    this.resultFormat.addEventListener("change", () => this.update());
    this.rounding.addEventListener("change", () => this.update());
  }

  // The paper's Section 3.3.2 addition: an fp32 accumulator plus a bf16-valued term, stored as bf16.
  showExample() {
    this.set({a: ["fp32", "0xC01A0E2E"], b: ["fp32", "0xC0130000"], result: "bf16", rounding: "nearest_even"});
  }

  set({a, b, result, rounding}) {
    [this.operands[0].format.value, this.operands[0].text.value] = a;
    [this.operands[1].format.value, this.operands[1].text.value] = b;
    this.resultFormat.value = result;
    this.rounding.value = rounding;
    this.update();
  }

  // A new format keeps the operand's value (rounded to nearest even if it must be: the notes say so).
  changeFormat(operand) {
    if (operand.parsed && !operand.parsed.error) operand.text.value = operand.parsed.decimal;
    this.update();
  }

  flipBit(operand, bit) {
    const parsed = operand.parsed;
    const bits = (parseInt(parsed.bits, 16) ^ (2 ** bit)) >>> 0;
    operand.text.value = "0x" + bits.toString(16).toUpperCase().padStart(Math.ceil(parsed.width / 4), "0");
    this.update();
  }

  drawBits(operand) {
    const parsed = operand.parsed;
    operand.bits.textContent = "";
    if (!parsed || parsed.error) return;
    const bits = parseInt(parsed.bits, 16);
    for (let bit = parsed.width - 1; bit >= 0; --bit) {
      const button = document.createElement("button");
      button.type = "button";
      button.dataset.bit = bit;
      button.className = "bit " + (bit === parsed.width - 1 ? "sign" : bit >= parsed.fraction_bits ? "exponent" : "fraction");
      button.textContent = Math.floor(bits / 2 ** bit) % 2;
      button.title = `bit ${bit}: click to flip`;
      button.addEventListener("click", () => this.flipBit(operand, bit));
      operand.bits.appendChild(button);
    }
  }

  update() {
    for (const operand of this.operands) {
      const argument = operandArgument(operand.format.value, operand.text.value);
      operand.parsed = this.library.call("bitexact_parse_operand", argument);
      operand.value.textContent = operand.parsed.error ? operand.parsed.error : operand.parsed.value;
      operand.value.classList.toggle("error", Boolean(operand.parsed.error));
      this.drawBits(operand);
    }
    const [a, b] = this.operands.map((operand) => operandArgument(operand.format.value, operand.text.value));
    const added = this.library.call("bitexact_trace_add", a, b, this.resultFormat.value, this.rounding.value);
    // What the command line for this trace is, so that a reader (or a test) can run it.
    const command = `bitexact trace add ${a} ${b}` + (this.resultFormat.value ? ` --to ${this.resultFormat.value}` : "") +
                    ` --round ${this.rounding.value}`;
    document.getElementById("trace-command").textContent = command;
    if (added.error) {
      this.message.textContent = added.error;
      this.message.className = "error";
      this.trace.textContent = "";
    } else {
      this.message.textContent = added.notes.join("\n");
      this.message.className = "note";
      renderTrace(this.trace, added.trace);
    }
    this.trace.dataset.command = command;
    if (!window.bitexactTimings.first_trace_ms) window.bitexactTimings.first_trace_ms = performance.now();
  }
}
