// A model family's options, rendered from its schema (`options` in GET /v1/models: name, type,
// default, help, range, min/max, choices). Empty fields keep the model's default and are not sent.
import { el } from "./dom.js";

// Fill `box` with one labelled field per option (ids `${prefix}-opt-NAME`, so an error naming the
// option marks it); returns a function giving the values set.
export function renderOptions(box, schema, prefix = "speak") {
  box.replaceChildren();
  const readers = [];
  for (const option of schema) {
    const id = `${prefix}-opt-${option.name}`;
    const hintId = `${id}-hint`;
    const defaultText = option.default == null ? "the model's own" : String(option.default);
    const hint = el("p", { class: "hint", id: hintId, text: `${option.help} (default: ${defaultText}${option.range ? `; ${option.range}` : ""})` });
    let input;
    let read;
    if (option.type === "bool" || (option.type === "str" && option.choices)) {
      const choices = option.type === "bool" ? ["true", "false"] : option.choices;
      input = el("select", { id, name: option.name, "aria-describedby": hintId }, el("option", { value: "", text: "default" }));
      for (const choice of choices) input.append(el("option", { value: choice, text: choice }));
      read = () => (input.value === "" ? undefined : option.type === "bool" ? input.value === "true" : input.value);
    } else if (option.type === "int" || option.type === "float") {
      input = el("input", {
        id, name: option.name, type: "number", inputmode: option.type === "int" ? "numeric" : "decimal",
        step: option.type === "int" ? "1" : "any", placeholder: option.default == null ? "" : String(option.default),
        min: option.min, max: option.max, "aria-describedby": hintId,
      });
      read = () => (input.value.trim() === "" ? undefined : Number(input.value));
    } else {
      input = el("input", { id, name: option.name, placeholder: option.default ?? "", "aria-describedby": hintId });
      read = () => (input.value === "" ? undefined : input.value);
    }
    box.append(el("div", { class: "field" }, el("label", { for: id, text: option.name.replaceAll("_", " ") }), input, hint));
    readers.push([option.name, read]);
  }
  return () => {
    const values = {};
    for (const [name, read] of readers) {
      const value = read();
      if (value !== undefined) values[name] = value;
    }
    return values;
  };
}

// Put `values` (a past request's options) back into the fields.
export function fillOptions(values) {
  for (const [name, value] of Object.entries(values || {})) {
    const input = document.getElementById(`speak-opt-${name}`);
    if (input) input.value = String(value);
  }
}
