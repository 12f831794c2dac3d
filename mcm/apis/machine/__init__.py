"""The ``machine.sapcloud.io`` API group: typed models (:mod:`.v1alpha1`), observable string
constants (:mod:`.constants`) and validation (:mod:`.validation`)."""

GROUP = "machine.sapcloud.io"
"""API group of the machine kinds."""
