// stylelint's standard rules for the console's style sheet, but one: it is
// ordered by component (header, cards, tables, waterfall), not by selector
// specificity, which `no-descending-specificity` would impose.
module.exports = {
  extends: "stylelint-config-standard",
  rules: {
    "no-descending-specificity": null,
  },
};
