#!/usr/bin/python3
"""SimGrid 3.32 platform XML and hostfile for N hosts (bench/smpi/README.md).

  cluster_xml.py flat|fat-tree HOSTS OUT_DIR [--gbps 10] [--lat 5us] [--hosts-per-leaf 16] [--oversubscription 1]

flat:     every host has a link of its own to one non-blocking switch (a SimGrid cluster
          without backbone: the hosts' links SPLITDUPLEX, full-duplex Ethernet; the switch limits
          no flow, the hosts' links do). A message crosses 2 links: latency 2 x lat.
fat-tree: SimGrid's two-level FAT_TREE cluster: leaf switches of `hosts-per-leaf` hosts, each
          leaf linked to every spine (hosts-per-leaf / oversubscription spines: 1 is full
          bisection). Within a leaf 2 links (2 x lat), across leaves 4 (4 x lat). SimGrid builds
          hosts-per-leaf x leaves hosts; the hostfile lists the first N.

Every host has a loopback of no latency: allreduce_sim.cc's only message to itself is a
zero-byte sentinel that must arrive at once. Each host's speed is 1 Gflop/s; the simulations run with smpi/host-speed 1Gf, so that
smpi_execute(seconds) takes exactly those seconds (the computation itself is not simulated).
Writes OUT_DIR/platform.xml and OUT_DIR/hostfile; prints the platform's path.
"""
import argparse
import math
import os

SPEED = "1Gf"  # must equal --cfg=smpi/host-speed (simulate_scaling.py passes both)


def fat_tree_shape(hosts, per_leaf, oversubscription):
    """(hosts per leaf, leaves, spines) for `hosts` hosts."""
    per_leaf = max(1, min(per_leaf, hosts))
    leaves = math.ceil(hosts / per_leaf)
    spines = max(1, per_leaf // oversubscription)
    return per_leaf, leaves, spines


def platform_xml(topology, hosts, gbps, lat, per_leaf=16, oversubscription=1):
    if not 1 <= hosts <= 65536:
        raise ValueError(f"hosts: {hosts}")
    bw = f"{gbps:g}Gbps"
    loopback = 'loopback_bw="10000Gbps" loopback_lat="0us"'
    if topology == "flat":
        # No backbone: a non-blocking switch constrains nothing but the hosts' links, and a
        # backbone (even FATPIPE) would put every flow on one constraint of SimGrid's solver,
        # which then recomputes every flow at every event (256 hosts: 225 s a step, not 17).
        cluster = (f'<cluster id="flat" prefix="host-" suffix="" radical="0-{hosts - 1}" speed="{SPEED}" '
                   f'bw="{bw}" lat="{lat}" sharing_policy="SPLITDUPLEX" {loopback}/>')
        total = hosts
    elif topology == "fat-tree":
        m1, m2, w2 = fat_tree_shape(hosts, per_leaf, oversubscription)
        total = m1 * m2
        # levels; children per switch (leaf: hosts, spine: leaves); parents per node (a host: 1
        # leaf, a leaf: every spine); parallel links between a node and each parent.
        params = f"2;{m1},{m2};1,{w2};1,1"
        cluster = (f'<cluster id="fattree" topology="FAT_TREE" topo_parameters="{params}" prefix="host-" suffix="" '
                   f'radical="0-{total - 1}" speed="{SPEED}" bw="{bw}" lat="{lat}" sharing_policy="SPLITDUPLEX" '
                   f'{loopback}/>')
    else:
        raise ValueError(f"topology: {topology}")
    xml = ("<?xml version='1.0'?>\n"
           '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
           '<platform version="4.1">\n'
           f"  {cluster}\n"
           "</platform>\n")
    return xml, [f"host-{i}" for i in range(hosts)], total


def write(topology, hosts, out_dir, gbps=10.0, lat="5us", per_leaf=16, oversubscription=1):
    """Writes the platform and hostfile; returns (platform path, hostfile path)."""
    xml, names, _ = platform_xml(topology, hosts, gbps, lat, per_leaf, oversubscription)
    os.makedirs(out_dir, exist_ok=True)
    platform, hostfile = os.path.join(out_dir, "platform.xml"), os.path.join(out_dir, "hostfile")
    with open(platform, "w") as f:
        f.write(xml)
    with open(hostfile, "w") as f:
        f.write("\n".join(names) + "\n")
    return platform, hostfile


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("topology", choices=["flat", "fat-tree"])
    p.add_argument("hosts", type=int)
    p.add_argument("out_dir")
    p.add_argument("--gbps", type=float, default=10.0, help="every link's bandwidth, Gbit/s (default 10)")
    p.add_argument("--lat", default="5us", help="every link's latency, SimGrid units (default 5us)")
    p.add_argument("--hosts-per-leaf", type=int, default=16)
    p.add_argument("--oversubscription", type=int, default=1)
    a = p.parse_args()
    platform, _ = write(a.topology, a.hosts, a.out_dir, a.gbps, a.lat, a.hosts_per_leaf, a.oversubscription)
    print(platform)


if __name__ == "__main__":
    main()
