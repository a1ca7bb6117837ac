module github.com/utxo-cache/utxo-cache/deploy

go 1.26.7

require (
	github.com/prometheus/prometheus v0.316.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
