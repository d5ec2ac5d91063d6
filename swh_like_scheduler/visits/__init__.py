"""The origin-visit scheduler: listers, listed origins, visit statistics
(:mod:`.model`) and what a visit's status does to them (:mod:`.feedback`)."""
