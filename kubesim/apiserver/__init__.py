"""kubesim's API server: the store and its watches, REST and its verbs, admission and webhooks,
authentication and RBAC, tables, OpenAPI and protobuf, as kube-apiserver serves them."""
