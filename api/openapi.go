package api

import _ "embed"

// openAPIDocument is the OpenAPI 3 description of the API, served at
// /openapi.yaml; a test validates real responses against it.
//
//go:embed openapi.yaml
var openAPIDocument []byte
