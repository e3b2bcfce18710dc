"""The scaling model of data-parallel training in bench/results.md ("Data-parallel training").

usage: python3 bench/ddp_scaling.py MODEL=MS_PER_SAMPLE:GRADIENT_MB:BACKWARD_SHARE ...
       [--batch-per-host N] [--global-batch N] [--overlap F]

Prints, for each model and for 10 and 100 Gbit/s, markdown rows for R = 2, 4, 8, 16, 32, 64
hosts. The terms (Patarasuk & Yuan 2009; Thakur, Rabenseifner & Gropp 2005), per update:

  ring allreduce   T_comm(R) = 2 (R-1)/R * G / B          bandwidth: every byte crosses twice
                             + 2 (R-1) * alpha * buckets  latency: 2 (R-1) rounds per bucket
                             + (R-1)/R * G / M            the sums, on the CPU, at memory speed
  compute          T_comp(b) = b * MS_PER_SAMPLE          measured on this machine (2 cores)
  overlap          the allreduce can hide behind the part of the backward pass left after
                   the first bucket is final: F * BACKWARD_SHARE * T_comp
  update           T(R, b) = T_comp(b) + max(0, T_comm(R) - F * BACKWARD_SHARE * T_comp(b))

with G the gradient bytes, B the link's bandwidth (line rate, bytes/s), alpha = 30 us a message
(TCP), 25 MiB buckets, M = 10 GB/s for reading two operands and writing the sum. Weak scaling
keeps N samples per host (the global batch grows with R): efficiency T_comp / T. Strong scaling
keeps the global batch (N_global / R a host): speedup over one host = T(1) / T(R).
"""
import argparse
import math

ALPHA_S = 30e-6
BUCKET_BYTES = 25 * 2**20
MEMORY_BYTES_PER_S = 10e9
LINKS = {'10 Gbit/s': 10e9 / 8, '100 Gbit/s': 100e9 / 8}
HOSTS = [2, 4, 8, 16, 32, 64]


def allreduce_s(ranks, gradient_bytes, bandwidth):
    if ranks == 1:
        return 0.0
    buckets = math.ceil(gradient_bytes / BUCKET_BYTES)
    share = (ranks - 1) / ranks
    return (2 * share * gradient_bytes / bandwidth + 2 * (ranks - 1) * ALPHA_S * buckets +
            share * gradient_bytes / MEMORY_BYTES_PER_S)


def update_s(ranks, samples, model, bandwidth, overlap):
    compute = samples * model['ms'] / 1e3
    hidden = overlap * model['backward'] * compute
    return compute, allreduce_s(ranks, model['bytes'], bandwidth), compute + max(
        0.0, allreduce_s(ranks, model['bytes'], bandwidth) - hidden)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('models', nargs='+', help='NAME=MS_PER_SAMPLE:GRADIENT_MB:BACKWARD_SHARE')
    parser.add_argument('--batch-per-host', type=int, default=32)
    parser.add_argument('--global-batch', type=int, default=256)
    parser.add_argument('--overlap', type=float, default=0.8,
                        help='the share of the backward pass after the first bucket the allreduce can use')
    args = parser.parse_args()
    print('| model | link | R | allreduce ms | hidden from (samples/host) | weak: efficiency | '
          'strong: ms/update | strong: speedup | strong: efficiency |')
    print('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
    for spec in args.models:
        name, figures = spec.split('=')
        ms, mb, backward = (float(v) for v in figures.split(':'))
        model = {'ms': ms, 'bytes': mb * 1e6, 'backward': backward}
        for link, bandwidth in LINKS.items():
            one = update_s(1, args.global_batch, model, bandwidth, args.overlap)[2]
            for ranks in HOSTS:
                compute, comm, weak = update_s(ranks, args.batch_per_host, model, bandwidth, args.overlap)
                _, _, strong = update_s(ranks, args.global_batch / ranks, model, bandwidth, args.overlap)
                # The smallest batch per host whose backward pass hides the allreduce.
                hidden_from = comm / (args.overlap * backward * ms / 1e3)
                print(f'| {name} | {link} | {ranks} | {comm * 1e3:.0f} | {hidden_from:.1f} | {compute / weak:.2f} | '
                      f'{strong * 1e3:.0f} | {one / strong:.1f} | {one / strong / ranks:.2f} |')


if __name__ == '__main__':
    main()
