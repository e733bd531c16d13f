"""ament_python package of the pairedge ROS 2 node (``colcon build --packages-select pairedge_ros``).

The node itself is ``pairedge.apps.ros.node`` in the pip package ``pairedge``, installed into the same Python
(``pip install '.[ros]'`` from a clone); this package gives ROS 2 its executable, launch file and
parameter file, so ``ros2 run pairedge_ros pairedge_node`` and ``ros2 launch pairedge_ros pairedge.launch.py``
work.
"""

from glob import glob

from setuptools import setup

PACKAGE = "pairedge_ros"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=[PACKAGE],
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="pairedge maintainers",
    maintainer_email="pairedge@example.org",
    description="pairedge on ROS 2: pairwise human interactions from a camera and a person detector",
    license="Apache-2.0",
    entry_points={"console_scripts": [f"pairedge_node = {PACKAGE}.node:main"]},
)
