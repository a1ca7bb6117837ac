package blockfrost_test

import (
	"errors"
	"testing"

	"github.com/utxo-cache/utxo-cache/blockfrost"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/textenc"
)

// FuzzParseSubject: the address parser never panics, refuses with
// chain.ErrInvalidArgument only, and what it accepts is one of its kinds:
// a credential of 28 bytes, or an address it keeps as given.
func FuzzParseSubject(f *testing.F) {
	for _, s := range []string{
		shelley(1, 2, false), shelley(3, 4, true),
		textenc.Bech32("addr_vkh", textenc.ConvertBits(hash28(1)), textenc.Bech32Const),
		textenc.Bech32("script", textenc.ConvertBits(hash28(2)), textenc.Bech32Const),
		"DdzFFzCqrhsw3prhfMFDNFowbzUku3QmrMwarfjUbWXRisodn97R436SHc1rimp4MhPNmbdYb1aTdqtGSJixMVMi5MkArDQJ6Sc1n3Ez",
		"Ae2tdPwUPEZFRbyhz3cpfC2CumGzNkFBN2L42rcUc2yjQpEkxDbkPodpMAi", "", "addr1", "script1qqqq",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sub, err := blockfrost.ParseSubject(s)
		if err != nil {
			if !errors.Is(err, chain.ErrInvalidArgument) {
				t.Fatalf("error of another class: %v", err)
			}
			return
		}
		switch {
		case sub.Hash != nil:
			if len(sub.Hash) != 28 || sub.Address != "" {
				t.Fatalf("credential %+v", sub)
			}
		case sub.Address != s || len(sub.Raw) == 0:
			t.Fatalf("address %+v of %q", sub, s)
		}
	})
}

// FuzzParsePage: the page parser never panics; what it accepts is in
// Blockfrost's ranges.
func FuzzParsePage(f *testing.F) {
	f.Add("100", "1", "asc", true)
	f.Add("0", "21474837", "up", false)
	f.Fuzz(func(t *testing.T, count, page, order string, given bool) {
		p, err := blockfrost.ParsePage(func(name string) (string, bool) {
			switch name {
			case "count":
				return count, given
			case "page":
				return page, given
			}
			return order, given
		})
		if err != nil {
			if !errors.Is(err, chain.ErrInvalidArgument) {
				t.Fatalf("error of another class: %v", err)
			}
			return
		}
		if p.Count < 1 || p.Count > blockfrost.MaxCount || p.Page < 1 || p.Page > blockfrost.MaxPage {
			t.Fatalf("accepted %+v", p)
		}
	})
}
