#!/bin/bash
echo "hello from the class"
