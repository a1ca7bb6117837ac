package netlab

// sysSetns is setns(2)'s number (see setns_amd64.go).
const sysSetns = 268
