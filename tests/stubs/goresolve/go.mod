module clusterset-dns/tests/stubs/goresolve

go 1.21
