"""What was learned: ``nas report``. ``reports.load`` is the only module that reads MLflow;
the rest (seed statistics, ablation comparisons, compute advantage, figures, the document and
its HTML and Markdown renderings) are functions over the data it returns. Imports no torch."""
