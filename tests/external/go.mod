// Module external proves that Tide works as a library from another
// module: it imports only the public packages, through a replace of the
// module to this checkout.
module example.com/tide-external

go 1.26

require github.com/tide-cdc/tide v0.0.0

replace github.com/tide-cdc/tide => ../..
