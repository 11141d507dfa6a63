"""The p2pdma suite: PCI peer-to-peer DMA through an NVMe controller memory buffer on
node1 (suite.yaml, test_p2pdma.py; p2pdma_guest.py runs in the guest, parse.py judges
its report)."""
