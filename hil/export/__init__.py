"""What a run recorded, turned into other tools' formats: MCAP for Foxglove (`foxglove`) and PNG
plots (`plots`). Each needs an optional extra, named when it is missing."""
