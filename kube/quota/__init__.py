"""Resource quota: what an object uses of a quota and how uses add up, shared by the API server's
admission (which charges a quota before an object is written) and the controller (which recounts
a namespace's use). ``resources`` holds the arithmetic of resource lists, ``evaluators`` one
evaluator per resource (upstream's pkg/quota/v1/evaluator/core and apiserver's generic ones)."""
