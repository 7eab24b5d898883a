"""Install Apache DistributedLog in Python: the `storage` core (and, as they land, the Spark layer and the CLI)."""

from setuptools import find_packages, setup

setup(
    name="distributedlog-py",
    version="0.1.0",
    description="Apache DistributedLog's core library in Python, put to work in Spark",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["storage", "storage.*"]),
    package_data={"storage": ["py.typed"]},
    install_requires=[
        "pyspark==4.3.*",
        "kazoo>=2.9",
        "pyarrow>=15",
        "lz4>=4.0",
        "py4j>=0.10.9",
        "crc32c>=2.3",
        "inotify_simple>=1.3",
    ],
    extras_require={
        "test": [
            "pytest>=8",
            "pytest-timeout>=2.2",
            "chispa>=0.10",
            "hypothesis>=6.100",
            "ruff>=0.6",
            "mypy>=1.10",
        ],
    },
)
