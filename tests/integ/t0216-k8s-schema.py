#!/usr/bin/python3
"""t0216-k8s-schema.py MANIFEST... - a schema check of Kubernetes manifests
offline, with the typed models of Debian's python3-kubernetes (the API's
OpenAPI schema, turned into classes): every field of every object must be
one the model of its kind knows, with the right shape (object, list, map,
scalar), and the fields the API requires must be there. kubectl validates
only against a server; this needs none. One line per problem, exit 1 if any.
"""
import re
import sys

import yaml
from kubernetes import client

SCALARS = {"str": str, "int": int, "bool": bool, "float": (int, float),
           "object": object, "datetime": str, "date": str}


def model_for(api_version, kind):
    """V1DaemonSet for apps/v1 DaemonSet, V1Secret for v1 Secret."""
    version = api_version.split("/")[-1]
    name = version[0].upper() + version[1:] + kind
    return getattr(client, name, None)


def required_fields(cls):
    """Fields whose setter refuses None: the API's required ones."""
    req = []
    for attr in cls.openapi_types:
        obj = cls.__new__(cls)
        obj.local_vars_configuration = client.Configuration()
        try:
            setattr(obj, attr, None)
        except ValueError:
            req.append(attr)
    return req


def check(value, type_name, path, errors):
    m = re.match(r"list\[(.*)\]$", type_name)
    if m:
        if not isinstance(value, list):
            errors.append(f"{path}: want a list")
            return
        for i, v in enumerate(value):
            check(v, m.group(1), f"{path}[{i}]", errors)
        return
    m = re.match(r"dict\(str, (.*)\)$", type_name)
    if m:
        if not isinstance(value, dict):
            errors.append(f"{path}: want a map")
            return
        for k, v in value.items():
            check(v, m.group(1), f"{path}.{k}", errors)
        return
    if type_name in SCALARS:
        # a quantity (resources) is a string or a number: the models say str
        quantity = re.search(r"\.resources\.(limits|requests)\.", path)
        if type_name == "str" and not isinstance(value, str) and not (
                quantity and isinstance(value, (int, float))):
            errors.append(f"{path}: want a string, got {value!r}")
        elif type_name == "int" and (not isinstance(value, int) or isinstance(value, bool)):
            errors.append(f"{path}: want an integer, got {value!r}")
        elif type_name == "bool" and not isinstance(value, bool):
            errors.append(f"{path}: want true or false, got {value!r}")
        return
    cls = getattr(client, type_name, None)
    if cls is None:
        errors.append(f"{path}: unknown model {type_name}")
        return
    if not isinstance(value, dict):
        errors.append(f"{path}: want an object ({type_name})")
        return
    by_json = {j: a for a, j in cls.attribute_map.items()}
    for key, v in value.items():
        if key not in by_json:
            errors.append(f"{path}.{key}: unknown field of {type_name}")
            continue
        check(v, cls.openapi_types[by_json[key]], f"{path}.{key}", errors)
    for attr in required_fields(cls):
        if cls.attribute_map[attr] not in value:
            errors.append(f"{path}: missing required field '{cls.attribute_map[attr]}'")


def main(paths):
    errors, n = [], 0
    for p in paths:
        with open(p) as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
        for i, doc in enumerate(docs):
            where = f"{p}#{i}"
            kind, api = doc.get("kind"), doc.get("apiVersion")
            cls = model_for(api or "", kind or "")
            if cls is None:
                errors.append(f"{where}: unknown apiVersion/kind {api}/{kind}")
                continue
            check(doc, cls.__name__, f"{where}:{kind}", errors)
            n += 1
    for e in errors:
        print(f"t0216-k8s-schema: {e}")
    print(f"t0216-k8s-schema: {n} objects, {len(errors)} problems")
    return 1 if errors or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
