"""admissionregistration.k8s.io: ValidatingAdmissionPolicy and its bindings (the policies are
enforced by ``app.auth.policies``; their type checking writes status from ``app.controlplane``)."""
