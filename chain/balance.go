package chain

// Balance is what an address (or any index dimension value) holds at a tip:
// the sum of its live outputs' values and asset quantities, and their count.
// Assets are kept in (policy, name) byte order with non-zero quantities.
type Balance struct {
	Value  Uint128
	Assets []AssetSum
	Count  uint64
}

// AssetSum is the total quantity of one asset over a set of outputs.
type AssetSum struct {
	Policy   []byte
	Name     []byte
	Quantity Uint128
}
