module flurry.dev/client

go 1.19
