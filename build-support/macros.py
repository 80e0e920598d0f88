# Pants BUILD-file macros (pants.toml `build_file_prelude_globs`): evaluated like a BUILD file, so
# the target types are in scope and nothing can be imported.


def aiperf_service(name, entry_point="main", lib_dependencies=(), test_dependencies=(), include_tools=True):
    """The targets of one service folder `services/<name>`: `lib` (its package `aiperf.<name_>`),
    `tests` and `test_utils`, the pex `main` (`aiperf.<name_>.main:<entry_point>`) and the image
    `image` (repository `aiperf/<name>`, built from the folder's Containerfile). `include_tools`:
    the image build unpacks the pex into a venv (PEX_TOOLS=1 ... venv)."""
    package = name.replace("-", "_")
    python_sources(name="lib", sources=["aiperf/**/*.py"], dependencies=list(lib_dependencies) or None)
    python_tests(name="tests", sources=["tests/**/test_*.py"],
                 dependencies=[":test_utils", *test_dependencies])
    python_test_utils(name="test_utils", sources=["tests/**/conftest.py", "tests/**/_*.py"])
    pex_binary(name="main", entry_point=f"aiperf.{package}.main:{entry_point}", dependencies=[":lib"],
               include_tools=include_tools)
    docker_image(name="image", source="Containerfile", image_tags=["latest"], repository=f"aiperf/{name}",
                 dependencies=[":main"], tags=["image"])
