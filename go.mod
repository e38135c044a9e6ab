module github.com/sluice-go/sluice

go 1.26.8

require (
	github.com/HdrHistogram/hdrhistogram-go v1.1.2
	github.com/stretchr/testify v1.12.1
	github.com/valyala/fasthttp v1.78.0
	go.uber.org/automaxprocs v1.6.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/molecule-man/go-brrr v1.3.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
