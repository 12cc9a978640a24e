"""Classification logic: categories, the category index, scoring, routing policy and results. No web imports."""
