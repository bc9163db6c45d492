#!/usr/bin/env python3
"""Checks launchd job plists against launchd.plist(5) (macOS 15).

Every key must be one the man page documents, with the type it documents;
KeepAlive's dictionary keys likewise; Label must match the file name; the
program path must be absolute. Beyond the man page, boltwatch's own rule:
a job that restarts on failure (KeepAlive SuccessfulExit = false) must set
BOLTWATCH_CONFIG_ERROR_EXIT_STATUS = 0, or a config error restart-loops;
UserName and GroupName must be account names (launchd looks them up by
name, a number is not one); and a job that runs as a user other than root
must not be told to write (its logs, BOLTWATCH_LOG_FILE, BOLTWATCH_PID_FILE)
into a directory only root may write, such as /var/run.

Usage: plist_lint.py FILE.plist...   exits 1 and names file and key on a
problem. Stdlib only (plistlib), so it runs on Linux CI and on a Mac.
"""
import os
import plistlib
import re
import sys

STR, BOOL, INT, ARR, DICT = str, bool, int, list, dict

# launchd.plist(5): key -> accepted types.
KEYS = {
    "Label": (STR,),
    "Disabled": (BOOL,),
    "UserName": (STR,),
    "GroupName": (STR,),
    "inetdCompatibility": (DICT,),
    "LimitLoadToHosts": (ARR,),
    "LimitLoadFromHosts": (ARR,),
    "LimitLoadToSessionType": (STR, ARR),
    "LimitLoadToHardware": (DICT,),
    "LimitLoadFromHardware": (DICT,),
    "Program": (STR,),
    "ProgramArguments": (ARR,),
    "EnableGlobbing": (BOOL,),
    "EnableTransactions": (BOOL,),
    "EnablePressuredExit": (BOOL,),
    "OnDemand": (BOOL,),
    "ServiceIPC": (BOOL,),
    "KeepAlive": (BOOL, DICT),
    "RunAtLoad": (BOOL,),
    "RootDirectory": (STR,),
    "WorkingDirectory": (STR,),
    "EnvironmentVariables": (DICT,),
    "Umask": (INT, STR),
    "TimeOut": (INT,),
    "ExitTimeOut": (INT,),
    "ThrottleInterval": (INT,),
    "InitGroups": (BOOL,),
    "WatchPaths": (ARR,),
    "QueueDirectories": (ARR,),
    "StartOnMount": (BOOL,),
    "StartInterval": (INT,),
    "StartCalendarInterval": (DICT, ARR),
    "StandardInPath": (STR,),
    "StandardOutPath": (STR,),
    "StandardErrorPath": (STR,),
    "Debug": (BOOL,),
    "WaitForDebugger": (BOOL,),
    "SoftResourceLimits": (DICT,),
    "HardResourceLimits": (DICT,),
    "Nice": (INT,),
    "ProcessType": (STR,),
    "AbandonProcessGroup": (BOOL,),
    "LowPriorityIO": (BOOL,),
    "LowPriorityBackgroundIO": (BOOL,),
    "MaterializeDatalessFiles": (BOOL,),
    "LaunchOnlyOnce": (BOOL,),
    "MachServices": (DICT,),
    "Sockets": (DICT,),
    "LaunchEvents": (DICT,),
    "SessionCreate": (BOOL,),
    "LegacyTimers": (BOOL,),
    "AssociatedBundleIdentifiers": (STR, ARR),
}
KEEPALIVE = {
    "SuccessfulExit": (BOOL,),
    "NetworkState": (BOOL,),
    "PathState": (DICT,),
    "OtherJobEnabled": (DICT,),
    "Crashed": (BOOL,),
    "AfterInitialDemand": (DICT,),
}
PROCESS_TYPES = {"Background", "Standard", "Adaptive", "Interactive"}
CONFIG_ERROR_ENV = "BOLTWATCH_CONFIG_ERROR_EXIT_STATUS"
# An account name as macOS takes one (the _ prefix is the daemon convention).
ACCOUNT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
# Files the job writes: launchd opens the first two as the job's user, the
# job itself the rest.
WRITTEN = ("StandardOutPath", "StandardErrorPath")
WRITTEN_ENV = ("BOLTWATCH_LOG_FILE", "BOLTWATCH_PID_FILE")
# Directories only root may write on macOS.
ROOT_ONLY = ("/var/run", "/private/var/run", "/etc", "/private/etc", "/usr", "/Library/LaunchDaemons")


def typename(types):
    return "/".join(t.__name__ for t in types)


def check_types(path, where, value, table):
    errs = []
    for key, v in value.items():
        if key not in table:
            errs.append(f"{path}: key {where}{key}: not in launchd.plist(5)")
            continue
        types = table[key]
        # bool is an int subclass in Python: check it first.
        ok = any(
            isinstance(v, t) and not (t is INT and isinstance(v, bool)) for t in types
        )
        if not ok:
            errs.append(
                f"{path}: key {where}{key}: {type(v).__name__}, launchd.plist(5) says {typename(types)}"
            )
    return errs


def lint(path):
    with open(path, "rb") as f:
        try:
            job = plistlib.load(f)
        except Exception as e:  # plistlib raises several types
            return [f"{path}: not a property list: {e}"]
    if not isinstance(job, dict):
        return [f"{path}: top level is {type(job).__name__}, not a dictionary"]
    errs = check_types(path, "", job, KEYS)
    label = job.get("Label")
    if label is None:
        errs.append(f"{path}: key Label: required")
    elif os.path.basename(path) != f"{label}.plist":
        errs.append(f"{path}: key Label: {label!r} but the file is not named {label}.plist")
    args = job.get("ProgramArguments")
    if args is None and "Program" not in job:
        errs.append(f"{path}: key ProgramArguments: required without Program")
    if isinstance(args, list):
        if not args or not all(isinstance(a, str) for a in args):
            errs.append(f"{path}: key ProgramArguments: must be a non-empty array of strings")
        elif not args[0].startswith("/"):
            errs.append(f"{path}: key ProgramArguments: {args[0]!r} is not an absolute path")
    ka = job.get("KeepAlive")
    if isinstance(ka, dict):
        errs += check_types(path, "KeepAlive.", ka, KEEPALIVE)
    if job.get("ProcessType", "Standard") not in PROCESS_TYPES:
        errs.append(f"{path}: key ProcessType: {job['ProcessType']!r} not one of {sorted(PROCESS_TYPES)}")
    env = job.get("EnvironmentVariables", {})
    if isinstance(env, dict):
        for k, v in env.items():
            if not isinstance(v, str):
                errs.append(f"{path}: key EnvironmentVariables.{k}: values must be strings")
    restarts_on_failure = ka is True or (isinstance(ka, dict) and ka.get("SuccessfulExit") is False)
    if restarts_on_failure and env.get(CONFIG_ERROR_ENV) != "0":
        errs.append(
            f"{path}: key EnvironmentVariables.{CONFIG_ERROR_ENV}: must be \"0\" when KeepAlive restarts on failure, or a config error restart-loops"
        )
    errs += check_user(path, job, env if isinstance(env, dict) else {})
    if ka is True:
        errs.append(f"{path}: key KeepAlive: true restarts even after a clean exit; use a dictionary")
    return errs


def check_user(path, job, env):
    """UserName/GroupName are names; a non-root job writes nowhere root-only."""
    errs = []
    for key in ("UserName", "GroupName"):
        v = job.get(key)
        if isinstance(v, str) and not ACCOUNT.match(v):
            errs.append(f"{path}: key {key}: {v!r} is not an account name")
    user = job.get("UserName")
    if not isinstance(user, str) or user == "root":
        return errs
    written = [(k, job.get(k)) for k in WRITTEN]
    written += [(f"EnvironmentVariables.{k}", env.get(k)) for k in WRITTEN_ENV]
    for key, v in written:
        if not isinstance(v, str):
            continue
        parent = os.path.dirname(v)
        if any(parent == d or parent.startswith(d + "/") for d in ROOT_ONLY):
            errs.append(f"{path}: key {key}: {parent} is root's, and the job runs as {user}")
    return errs


def main(paths):
    if not paths:
        print("usage: plist_lint.py FILE.plist...", file=sys.stderr)
        return 2
    errs = [e for p in paths for e in lint(p)]
    for e in errs:
        print(e, file=sys.stderr)
    if not errs:
        print(f"{len(paths)} plist(s) clean")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
