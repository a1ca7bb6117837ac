module github.com/utxo-cache/utxo-cache/deploy

go 1.26.0
