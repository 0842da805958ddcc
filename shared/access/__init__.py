"""Who asked and what they may do: access reviews, the RBAC a workload kind needs; the CA Podherd issues its
certificates from, and the private files (tokens, keys, certificates) a service reads or writes."""
