module fortio_decode

go 1.22

require fortio.org/fortio v1.66.5
