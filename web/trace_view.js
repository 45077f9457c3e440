// A trace as the command prints it (render.hpp's text style: a title per
// section, then "  " + the label padded to 12 + " " + the line), each piece
// of a line in a span whose class is its bits' role (kept, guard, round,
// sticky, shifted_out), so that the colours come from the record itself.
"use strict";

function renderTrace(target, trace) {
  target.textContent = "";
  trace.sections.forEach((section, index) => {
    const title = document.createElement("span");
    title.className = "trace-title";
    title.textContent = (index === 0 ? "" : "\n") + section.title + "\n";
    target.appendChild(title);
    for (const line of section.lines) {
      target.appendChild(document.createTextNode("  " + line.label.padEnd(12) + " "));
      for (const [text, role] of line.pieces) {
        if (role === "plain") {
          target.appendChild(document.createTextNode(text));
        } else {
          const piece = document.createElement("span");
          piece.className = "bit-" + role;
          piece.textContent = text;
          target.appendChild(piece);
        }
      }
      target.appendChild(document.createTextNode("\n"));
    }
  });
}
