package bitcoin

import (
	"fmt"
	"strings"

	"github.com/btcsuite/btcd/chaincfg"
)

// Network names a Bitcoin network. It selects the address encodings, the
// block-file magic and the genesis block. The zero value means Mainnet.
type Network string

// The supported networks. Signet is the default public signet; custom signets
// (other block challenges) are not supported.
const (
	Mainnet Network = "mainnet"
	Testnet Network = "testnet" // testnet3
	Signet  Network = "signet"
	Regtest Network = "regtest"
)

// ParseNetwork parses a network name, case-insensitively: "mainnet" (or
// "main"), "testnet" (or "testnet3", "test"), "signet", "regtest".
func ParseNetwork(s string) (Network, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "mainnet", "main":
		return Mainnet, nil
	case "testnet", "testnet3", "test":
		return Testnet, nil
	case "signet":
		return Signet, nil
	case "regtest":
		return Regtest, nil
	}
	return "", fmt.Errorf("%w: %q (want mainnet, testnet, signet or regtest)", ErrUnknownNetwork, s)
}

// String returns the canonical name; the zero value renders as "mainnet".
func (n Network) String() string {
	if n == "" {
		return string(Mainnet)
	}
	return string(n)
}

// params returns btcd's parameters of the network.
func (n Network) params() (*chaincfg.Params, error) {
	switch n {
	case "", Mainnet:
		return &chaincfg.MainNetParams, nil
	case Testnet:
		return &chaincfg.TestNet3Params, nil
	case Signet:
		return &chaincfg.SigNetParams, nil
	case Regtest:
		return &chaincfg.RegressionNetParams, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownNetwork, string(n))
}

// magic returns the network's message start as the little-endian uint32 that
// begins each record of a block file.
func (n Network) magic() (uint32, error) {
	p, err := n.params()
	if err != nil {
		return 0, err
	}
	return uint32(p.Net), nil
}

// networkOfMagic names the network whose block files start with magic, or "".
func networkOfMagic(magic uint32) Network {
	for _, n := range []Network{Mainnet, Testnet, Signet, Regtest} {
		if m, _ := n.magic(); m == magic {
			return n
		}
	}
	return ""
}
