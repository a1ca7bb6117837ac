package main

import (
	"fmt"

	"github.com/utxo-cache/utxo-cache/internal/diskspace"
	"github.com/utxo-cache/utxo-cache/node"
)

const ballastAbout = `
The ballast is a file, DIR/ballast, that serve creates at start when the
file system has room for it beyond --disk-reserve-bytes: space held in
reserve for the day the disk fills up (docs/disk-full.md).

  --remove  deletes it: the room it held is free at once, so a writer that
            refuses writes (507 insufficient_storage) takes them again, and a
            serve that would not start (disk full) starts. Then make room for
            good (a larger volume, other files removed) and recreate it.
  --create  creates it (of --ballast-bytes) if it is missing and the file
            system has room for it beyond --disk-reserve-bytes.
  neither   prints its state and the file system's free space.

It needs no running or stopped server: deleting the file is the whole
operation (rm DIR/ballast does the same).`

func runBallast(e *env, args []string) error {
	cl := newCommandLine("ballast", "ballast [flags]", ballastAbout)
	dataDir := dataDirFlag(cl.fs)
	remove := cl.fs.Bool("remove", false, "delete the ballast file to free its space")
	create := cl.fs.Bool("create", false, "create the ballast file if missing and there is room")
	var d diskFlags
	d.registerReserve(cl.fs)
	d.registerBallast(cl.fs)
	if err := cl.parse(e, args); err != nil {
		return err
	}
	if cl.fs.NArg() > 0 {
		return usagef("unexpected arguments %q", cl.fs.Args())
	}
	if *remove && *create {
		return usagef("--remove and --create: choose one")
	}
	reserve, err := d.reserveBytes()
	if err != nil {
		return err
	}
	if _, err := parseBallastFlag(d.ballast); err != nil {
		return err
	}
	path := diskspace.BallastPath(*dataDir)
	switch {
	case *remove:
		n, err := diskspace.RemoveBallast(*dataDir)
		if err != nil {
			return err
		}
		if n == 0 {
			fmt.Fprintf(e.stdout, "no ballast at %s\n", path)
		} else {
			fmt.Fprintf(e.stdout, "removed the ballast %s: %s freed\n", path, diskspace.FormatSize(n))
		}
	case *create:
		size, err := d.ballastBytes(*dataDir)
		if err != nil {
			return err
		}
		if size == 0 {
			return usagef("--create with --ballast-bytes 0: nothing to create")
		}
		b, err := diskspace.EnsureBallast(*dataDir, size, reserve)
		if err != nil {
			return err
		}
		if b.Created {
			fmt.Fprintf(e.stdout, "created the ballast %s: %s\n", path, diskspace.FormatSize(b.Size))
		} else {
			fmt.Fprintf(e.stdout, "the ballast %s already exists: %s\n", path, diskspace.FormatSize(b.Size))
		}
	}
	size, err := diskspace.BallastSize(*dataDir)
	if err != nil {
		return err
	}
	u, err := diskspace.UsageOf(*dataDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "ballast %s: %s; file system: %s available of %s; writes need %s free (--disk-reserve-bytes), start-up %s\n",
		path, diskspace.FormatSize(size), diskspace.FormatSize(u.Available), diskspace.FormatSize(u.Total), diskspace.FormatSize(reserve), diskspace.FormatSize(node.StartMargin(*dataDir, reserve)))
	return nil
}
