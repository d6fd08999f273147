"""Model registry: name -> constructor. A new model is its file plus one line here."""
